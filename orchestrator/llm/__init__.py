"""Chat models per role, the built-in llama.cpp server, what every endpoint is sent, and repairs of small models' output."""
