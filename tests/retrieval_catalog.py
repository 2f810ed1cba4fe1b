"""A catalog of 1,000 tools for retrieval tests and the scale bench: Jarvis's real static tools, the MCP time
server's tools as the MCP adapter exposes them, a hundred hand-written "generated" tools of the kind users ask
JARB for, and combinatorial generated variants (verb x object) as distractors. QUERIES pair a request a user
would type with the tool it needs."""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field, create_model

from integrations.base import set_tool_meta

# name, description, args {name: description}
GENERATED: list[tuple[str, str, dict[str, str]]] = [
    ("todoist_create_task", "Create a task in the user's Todoist inbox with an optional due date.", {"content": "task text", "due": "due date"}),
    ("convert_currency", "Convert an amount of money from one currency to another at today's exchange rate.", {"amount": "amount", "from_currency": "ISO code", "to_currency": "ISO code"}),
    ("word_count", "Count the words in a piece of text.", {"text": "the text"}),
    ("celsius_to_fahrenheit", "Convert a temperature from degrees Celsius to Fahrenheit.", {"celsius": "temperature"}),
    ("bmi_calculator", "Compute the body mass index from weight in kilograms and height in metres.", {"weight_kg": "weight", "height_m": "height"}),
    ("mortgage_payment", "Monthly payment of a fixed-rate mortgage loan given principal, annual interest rate and years.", {"principal": "loan amount", "rate": "annual rate", "years": "term"}),
    ("spotify_play_playlist", "Start playing a Spotify playlist on the user's active device.", {"playlist": "playlist name"}),
    ("hue_set_lights", "Set the brightness and colour of Philips Hue lights in a room.", {"room": "room name", "brightness": "0-100", "color": "colour"}),
    ("nest_set_thermostat", "Set the Nest thermostat's heating target temperature.", {"temperature": "degrees"}),
    ("github_list_pull_requests", "List open pull requests of a GitHub repository.", {"repo": "owner/name"}),
    ("github_create_issue", "Open a new issue in a GitHub repository.", {"repo": "owner/name", "title": "title", "body": "body"}),
    ("jira_create_ticket", "Create a Jira ticket in a project with a summary and description.", {"project": "key", "summary": "summary"}),
    ("slack_post_message", "Post a message to a Slack channel.", {"channel": "channel", "text": "message"}),
    ("notion_append_page", "Append a paragraph to a Notion page.", {"page": "page title", "text": "text"}),
    ("trello_add_card", "Add a card to a Trello board list.", {"board": "board", "list": "list", "title": "card title"}),
    ("weather_forecast", "Weather forecast for a city for the next days: temperature, rain, wind.", {"city": "city", "days": "days"}),
    ("air_quality_index", "Current air quality index (AQI) and pollutants for a city.", {"city": "city"}),
    ("stock_quote", "Latest stock price quote for a ticker symbol.", {"ticker": "symbol"}),
    ("crypto_price", "Current price of a cryptocurrency such as bitcoin or ether.", {"coin": "coin"}),
    ("translate_text", "Translate text into another language.", {"text": "text", "target_language": "language"}),
    ("detect_language", "Detect which language a text is written in.", {"text": "text"}),
    ("qr_code_generate", "Generate a QR code image for a URL or text and save it as PNG.", {"data": "content", "path": "output file"}),
    ("resize_image", "Resize an image file to a given width and height.", {"path": "image", "width": "px", "height": "px"}),
    ("compress_folder_zip", "Compress a folder into a zip archive.", {"folder": "folder", "archive": "zip path"}),
    ("extract_zip", "Extract a zip archive into a folder.", {"archive": "zip path", "folder": "destination"}),
    ("csv_to_json", "Convert a CSV file into a JSON array of records.", {"path": "csv file"}),
    ("json_pretty_print", "Format a JSON document with indentation.", {"text": "json"}),
    ("markdown_to_html", "Render Markdown text to HTML.", {"text": "markdown"}),
    ("html_to_text", "Strip HTML tags and return readable plain text.", {"html": "html"}),
    ("url_shorten", "Shorten a long URL with a link shortener.", {"url": "url"}),
    ("website_status_check", "Check whether a website is up and how fast it answers.", {"url": "url"}),
    ("dns_lookup", "Look up the DNS records (A, MX, TXT) of a domain.", {"domain": "domain"}),
    ("ip_geolocation", "Find the country and city of an IP address.", {"ip": "address"}),
    ("password_generator", "Generate a random strong password.", {"length": "length"}),
    ("hash_file_sha256", "Compute the SHA-256 checksum of a file.", {"path": "file"}),
    ("uuid_generate", "Generate random UUIDs.", {"count": "how many"}),
    ("timezone_convert", "Convert a time from one time zone to another.", {"time": "time", "from_zone": "zone", "to_zone": "zone"}),
    ("days_between_dates", "Count the days between two dates.", {"start": "date", "end": "date"}),
    ("next_public_holiday", "Next public holiday in a country.", {"country": "country"}),
    ("sunrise_sunset", "Sunrise and sunset times for a place on a date.", {"place": "place", "date": "date"}),
    ("unit_convert_length", "Convert lengths between miles, kilometres, feet and metres.", {"value": "value", "from_unit": "unit", "to_unit": "unit"}),
    ("recipe_search", "Find cooking recipes that use given ingredients.", {"ingredients": "ingredients"}),
    ("calorie_lookup", "Nutrition facts and calories of a food.", {"food": "food"}),
    ("flight_status", "Current status, delay and gate of a flight by its number.", {"flight": "flight number"}),
    ("train_departures", "Next train departures from a station.", {"station": "station"}),
    ("package_tracking", "Track a parcel by its tracking number (UPS, FedEx, DHL).", {"tracking_number": "number"}),
    ("uber_estimate", "Estimate the price and arrival time of an Uber ride.", {"pickup": "address", "dropoff": "address"}),
    ("restaurant_reservation", "Book a table at a restaurant for a number of people and a time.", {"restaurant": "name", "people": "party size", "time": "time"}),
    ("movie_showtimes", "Cinema showtimes for a movie near a location.", {"movie": "title", "location": "city"}),
    ("podcast_latest_episode", "Latest episode of a podcast.", {"podcast": "name"}),
    ("news_headlines", "Top news headlines on a topic.", {"topic": "topic"}),
    ("wikipedia_summary", "Short summary of a Wikipedia article.", {"title": "article"}),
    ("dictionary_define", "Definition of an English word.", {"word": "word"}),
    ("synonyms_find", "Synonyms of a word.", {"word": "word"}),
    ("spell_check", "Find and fix spelling mistakes in text.", {"text": "text"}),
    ("sentiment_analyze", "Say whether a text is positive, negative or neutral.", {"text": "text"}),
    ("invoice_generate_pdf", "Create a PDF invoice for a client with line items.", {"client": "client", "items": "line items"}),
    ("expense_log", "Record an expense with amount, category and date in the budget spreadsheet.", {"amount": "amount", "category": "category"}),
    ("budget_summary", "Summary of spending per category this month.", {"month": "month"}),
    ("bank_balance", "Current balance of the user's bank accounts.", {"account": "account"}),
    ("habit_track", "Mark a habit (running, reading, meditation) as done today.", {"habit": "habit"}),
    ("water_intake_log", "Log glasses of water drunk today.", {"glasses": "count"}),
    ("sleep_report", "Last night's sleep duration and quality from the sleep tracker.", {"night": "date"}),
    ("step_count", "Steps walked today from the phone's health data.", {"date": "date"}),
    ("medication_reminder_list", "List the user's medication schedule.", {}),
    ("grocery_list_add", "Add items to the shared grocery shopping list.", {"items": "items"}),
    ("plant_watering_schedule", "Which house plants need watering today.", {}),
    ("car_fuel_log", "Log a fuel refill with litres and price for the car.", {"litres": "litres", "price": "price"}),
    ("parking_spot_save", "Remember where the car is parked.", {"location": "where"}),
    ("wifi_password_share", "Show the home Wi-Fi password as a QR code for guests.", {}),
    ("printer_status", "Ink levels and status of the home printer.", {}),
    ("backup_photos", "Back up the photos folder to the external disk.", {"source": "folder"}),
    ("disk_usage_report", "Which folders use the most disk space.", {"path": "folder"}),
    ("duplicate_files_find", "Find duplicate files in a folder by content.", {"path": "folder"}),
    ("rename_files_pattern", "Rename many files in a folder using a pattern.", {"folder": "folder", "pattern": "pattern"}),
    ("screenshot_ocr", "Read the text in a screenshot image (OCR).", {"path": "image"}),
    ("audio_transcribe", "Transcribe an audio recording to text.", {"path": "audio file"}),
    ("text_to_speech", "Read text aloud and save it as an MP3.", {"text": "text"}),
    ("meeting_notes_template", "Create a meeting notes document from a template.", {"title": "meeting"}),
    ("linkedin_post_draft", "Draft a LinkedIn post about a topic.", {"topic": "topic"}),
    ("tweet_schedule", "Schedule a tweet on X/Twitter for later.", {"text": "tweet", "when": "time"}),
    ("youtube_channel_stats", "Subscriber and view counts of a YouTube channel.", {"channel": "channel"}),
    ("arxiv_search", "Search arXiv for papers on a subject.", {"query": "subject"}),
    ("citation_format_bibtex", "Format a paper reference as a BibTeX entry.", {"title": "paper"}),
    ("math_solve_equation", "Solve an algebraic equation for x.", {"equation": "equation"}),
    ("prime_check", "Check whether a number is prime.", {"n": "number"}),
    ("roman_numerals", "Convert a number to Roman numerals.", {"n": "number"}),
    ("random_dice_roll", "Roll dice, for example 2d6.", {"dice": "notation"}),
    ("chess_best_move", "Suggest the best chess move for a position (FEN).", {"fen": "position"}),
    ("sudoku_solve", "Solve a sudoku puzzle.", {"grid": "grid"}),
    ("lottery_results", "Latest lottery draw results.", {"lottery": "name"}),
    ("sports_scores", "Latest scores of a sports team.", {"team": "team"}),
    ("gym_class_booking", "Book a class at the gym.", {"class_name": "class", "time": "time"}),
    ("doctor_appointment_book", "Book a doctor's appointment.", {"doctor": "doctor", "time": "time"}),
    ("pet_feeder_dispense", "Make the smart pet feeder dispense a portion of food for the cat.", {"portions": "portions"}),
    ("robot_vacuum_start", "Start the robot vacuum cleaner in a room.", {"room": "room"}),
    ("garage_door_toggle", "Open or close the garage door.", {"action": "open/close"}),
    ("doorbell_camera_snapshot", "Take a snapshot from the doorbell camera.", {}),
    ("energy_usage_today", "Household electricity usage today in kWh.", {}),
    ("solar_production", "Solar panel production today.", {}),
]

VERBS = ["get", "list", "create", "delete", "update", "export", "import", "archive", "sync", "count"]
OBJECTS = [
    "invoice", "contact", "playlist", "album", "photo", "bookmark", "snippet", "dataset", "dashboard", "webhook",
    "subscription", "coupon", "ticket", "lead", "campaign", "survey", "form", "template", "label", "tag",
    "project", "sprint", "milestone", "release", "branch", "deployment", "container", "volume", "secret", "certificate",
    "domain", "mailbox", "alias", "group", "role", "permission", "policy", "quota", "backup", "snapshot",
    "report", "metric", "alert", "incident", "runbook", "shift", "roster", "payroll", "timesheet", "vacation",
    "asset", "license", "vendor", "purchase_order", "shipment", "warehouse", "inventory_item", "product", "sku", "order",
    "refund", "payment", "payout", "customer", "review", "article", "glossary", "faq", "translation", "locale",
    "course", "lesson", "quiz", "grade", "student", "classroom", "event", "venue", "speaker", "session",
    "recipe_card", "workout", "route", "trip", "itinerary", "hotel_booking", "car_rental", "visa", "passport", "loyalty_card",
]


def _schema(name: str, args: dict[str, str]):
    fields = {a: (str, Field(description=d)) for a, d in args.items()}
    return create_model(f"{name}_args", **fields)


def _tool(name: str, description: str, args: dict[str, str], source: str, effects: list[str] | None = None) -> BaseTool:
    def run(**kwargs: Any) -> str:
        return f"{name} ran with {kwargs}"

    tool = StructuredTool.from_function(func=run, name=name, description=description, args_schema=_schema(name, args),
                                        infer_schema=False)
    return set_tool_meta(tool, side_effects=effects or [], source=source)


def build_catalog(real_tools: list[BaseTool], size: int = 1000) -> list[BaseTool]:
    tools = list(real_tools)
    # mcp-server-time's two tools, as the MCP adapter exposes them
    tools.append(_tool("get_current_time", "Get current time in a specific timezones", {"timezone": "IANA timezone name"}, "mcp"))
    tools.append(_tool("convert_time", "Convert time between timezones",
                       {"source_timezone": "source IANA zone", "time": "HH:MM", "target_timezone": "target IANA zone"}, "mcp"))
    tools += [_tool(n, d, a, "generated") for n, d, a in GENERATED]
    for verb, obj in itertools.product(VERBS, OBJECTS):
        if len(tools) >= size:
            break
        words = obj.replace("_", " ")
        tools.append(_tool(f"{verb}_{obj}", f"{verb.capitalize()} {words} records in the business back office.",
                           {"id": f"the {words} id", "filter": "optional filter"}, "generated"))
    return tools[:size]


QUERIES: list[tuple[str, str]] = [
    ("what files are in my Downloads folder?", "fs_list_dir"),
    ("read the notes.txt file for me", "fs_read_text"),
    ("write 'hello' into a new file todo.txt", "fs_write_text"),
    ("find files containing the word invoice in Documents", "fs_search"),
    ("what time is it now?", "time_now"),
    ("send a message to Bob on telegram saying I'm late", "messages_send"),
    ("start a long-running task to negotiate with the landlord over email", "jorb_create"),
    ("which background tasks are still open?", "jorb_list"),
    ("remind me tomorrow at 9 to call mom", "reminder_create"),
    ("show my reminders", "reminder_list"),
    ("cancel the reminder about the dentist", "reminder_cancel"),
    ("what time is it in Tokyo right now", "get_current_time"),
    ("convert 14:30 from New York timezone to Berlin timezone", "convert_time"),
    ("add 'buy milk' to my Todoist inbox", "todoist_create_task"),
    ("how much is 250 euros in dollars", "convert_currency"),
    ("count the words in this paragraph", "word_count"),
    ("convert 21 celsius to fahrenheit", "celsius_to_fahrenheit"),
    ("what's my body mass index if I weigh 80 kg and I'm 1.8 m", "bmi_calculator"),
    ("monthly mortgage payment for a 300000 loan at 4% over 25 years", "mortgage_payment"),
    ("play my running playlist on spotify", "spotify_play_playlist"),
    ("dim the living room hue lights to 30 percent", "hue_set_lights"),
    ("set the nest thermostat to 20 degrees", "nest_set_thermostat"),
    ("list open pull requests in the jarvis github repo", "github_list_pull_requests"),
    ("open a github issue about the login bug", "github_create_issue"),
    ("create a jira ticket in project OPS for the outage", "jira_create_ticket"),
    ("post 'deploy done' in the #eng slack channel", "slack_post_message"),
    ("append this idea to my notion page Ideas", "notion_append_page"),
    ("add a card 'fix roof' to the trello house board", "trello_add_card"),
    ("will it rain in Paris this weekend? weather forecast", "weather_forecast"),
    ("how is the air quality in Delhi today", "air_quality_index"),
    ("what's Apple's stock price", "stock_quote"),
    ("bitcoin price now", "crypto_price"),
    ("translate 'good morning' into Japanese", "translate_text"),
    ("which language is this text written in", "detect_language"),
    ("make a QR code for my website url", "qr_code_generate"),
    ("resize photo.jpg to 800 by 600", "resize_image"),
    ("zip the project folder into an archive", "compress_folder_zip"),
    ("unzip the archive I downloaded", "extract_zip"),
    ("turn data.csv into json", "csv_to_json"),
    ("pretty print this json", "json_pretty_print"),
    ("render this markdown as html", "markdown_to_html"),
    ("strip the html tags from this page source", "html_to_text"),
    ("shorten this long url", "url_shorten"),
    ("is my website up? check its status", "website_status_check"),
    ("look up the MX records for example.com", "dns_lookup"),
    ("where is the IP address 8.8.8.8 located", "ip_geolocation"),
    ("generate a strong random password", "password_generator"),
    ("sha256 checksum of the installer file", "hash_file_sha256"),
    ("give me three new uuids", "uuid_generate"),
    ("convert 9am London time to Sydney time zone", "timezone_convert"),
    ("how many days between 1 March and 15 June", "days_between_dates"),
    ("when is the next public holiday in Germany", "next_public_holiday"),
    ("sunset time in Lisbon tomorrow", "sunrise_sunset"),
    ("how many kilometres is 26 miles", "unit_convert_length"),
    ("find a recipe with chicken, rice and lemon", "recipe_search"),
    ("how many calories in an avocado", "calorie_lookup"),
    ("is flight LH400 delayed", "flight_status"),
    ("next trains departing from Zurich station", "train_departures"),
    ("track my DHL parcel", "package_tracking"),
    ("how much would an uber to the airport cost", "uber_estimate"),
    ("book a table for 4 at Luigi's at 8pm", "restaurant_reservation"),
    ("showtimes for Dune near me", "movie_showtimes"),
    ("latest episode of the Lex Fridman podcast", "podcast_latest_episode"),
    ("top news headlines about climate", "news_headlines"),
    ("summarize the wikipedia article on Ada Lovelace", "wikipedia_summary"),
    ("define the word 'serendipity'", "dictionary_define"),
    ("synonyms for happy", "synonyms_find"),
    ("fix the spelling mistakes in my essay", "spell_check"),
    ("is this customer review positive or negative", "sentiment_analyze"),
    ("create a pdf invoice for ACME with these line items", "invoice_generate_pdf"),
    ("log a 45 euro expense for groceries", "expense_log"),
    ("how much did I spend per category this month", "budget_summary"),
    ("what's my bank account balance", "bank_balance"),
    ("mark meditation habit as done today", "habit_track"),
    ("I drank 3 glasses of water, log it", "water_intake_log"),
    ("how did I sleep last night", "sleep_report"),
    ("how many steps did I walk today", "step_count"),
    ("add eggs and bread to the shopping list", "grocery_list_add"),
    ("which house plants need watering today", "plant_watering_schedule"),
    ("log a fuel refill of 40 litres", "car_fuel_log"),
    ("remember where I parked the car", "parking_spot_save"),
    ("show the wifi password for guests", "wifi_password_share"),
    ("how much ink is left in the printer", "printer_status"),
    ("back up my photos to the external disk", "backup_photos"),
    ("which folders take the most disk space", "disk_usage_report"),
    ("find duplicate files in Pictures", "duplicate_files_find"),
    ("rename all these files with a date pattern", "rename_files_pattern"),
    ("read the text in this screenshot with ocr", "screenshot_ocr"),
    ("transcribe this voice memo recording", "audio_transcribe"),
    ("read this text aloud as an mp3", "text_to_speech"),
    ("schedule a tweet for tomorrow morning", "tweet_schedule"),
    ("search arxiv for papers on diffusion models", "arxiv_search"),
    ("solve the equation 3x + 5 = 20", "math_solve_equation"),
    ("roll 2d6 dice", "random_dice_roll"),
    ("feed the cat with the smart pet feeder", "pet_feeder_dispense"),
    ("start the robot vacuum in the kitchen", "robot_vacuum_start"),
    ("close the garage door", "garage_door_toggle"),
    ("take a snapshot from the doorbell camera", "doorbell_camera_snapshot"),
    ("export all invoice records from the back office", "export_invoice"),
    ("delete the expired coupon records", "delete_coupon"),
]
