-- The tool_registry database as Jarvis a12ba1e made it (scripts/dump_old_schema.py). Do not edit.
CREATE TABLE generated_tools (
	id INTEGER NOT NULL, 
	name VARCHAR(64) NOT NULL, 
	version INTEGER NOT NULL, 
	path TEXT NOT NULL, 
	tests_path TEXT NOT NULL, 
	sha256 VARCHAR(64) NOT NULL, 
	schema_json TEXT NOT NULL, 
	side_effects TEXT NOT NULL, 
	spec_json TEXT NOT NULL, 
	manifest_json TEXT NOT NULL, 
	test_report TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	trust VARCHAR(16) NOT NULL, 
	confirmed_calls INTEGER NOT NULL, 
	network_approved BOOLEAN NOT NULL, 
	request_key VARCHAR(512), 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	source TEXT, 
	tests_source TEXT, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_tool_version UNIQUE (name, version), 
	UNIQUE (request_key)
);
CREATE INDEX ix_generated_tools_name ON generated_tools (name);
CREATE INDEX ix_generated_tools_status ON generated_tools (status);
