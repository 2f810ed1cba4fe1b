-- The jarvis database as Jarvis aeea0bf made it (scripts/dump_old_schema.py). Do not edit.
CREATE TABLE effects_ledger (
	"key" VARCHAR(512) NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	tool VARCHAR(256) NOT NULL, 
	args_json TEXT NOT NULL, 
	side_effects TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	result_text TEXT, 
	result_ok INTEGER NOT NULL, 
	pid INTEGER NOT NULL, 
	host VARCHAR(256) NOT NULL, 
	started_at DATETIME NOT NULL, 
	completed_at DATETIME, 
	PRIMARY KEY ("key")
);
CREATE INDEX ix_effects_ledger_thread_id ON effects_ledger (thread_id);
CREATE INDEX ix_effects_ledger_status ON effects_ledger (status);
CREATE TABLE android_tasks (
	task_id VARCHAR(64) NOT NULL, 
	goal TEXT NOT NULL, 
	server VARCHAR(128) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	result TEXT, 
	error TEXT, 
	steps INTEGER NOT NULL, 
	actions_json TEXT NOT NULL, 
	pid INTEGER NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (task_id)
);
CREATE INDEX ix_android_tasks_status ON android_tasks (status);
CREATE TABLE threads (
	thread_id VARCHAR(256) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	title TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (thread_id)
);
CREATE INDEX ix_threads_status ON threads (status);
CREATE INDEX ix_threads_updated_at ON threads (updated_at);
CREATE TABLE message_archive (
	thread_id VARCHAR(256) NOT NULL, 
	message_id VARCHAR(256) NOT NULL, 
	position INTEGER NOT NULL, 
	data TEXT NOT NULL, 
	PRIMARY KEY (thread_id, message_id)
);
CREATE INDEX ix_message_archive_position ON message_archive (position);
CREATE TABLE jorbs (
	id VARCHAR(32) NOT NULL, 
	name TEXT NOT NULL, 
	"plan" TEXT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	mode VARCHAR(16) NOT NULL, 
	policy VARCHAR(64) NOT NULL, 
	contacts_json TEXT NOT NULL, 
	waiting_channel VARCHAR(32), 
	waiting_party VARCHAR(256), 
	pause_reason TEXT, 
	result_json TEXT, 
	error TEXT, 
	steps INTEGER NOT NULL, 
	tokens INTEGER NOT NULL, 
	autonomy_json TEXT NOT NULL, 
	context_json TEXT, 
	options_json TEXT NOT NULL, 
	origin_thread VARCHAR(256), 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_jorbs_status ON jorbs (status);
CREATE INDEX ix_jorbs_updated_at ON jorbs (updated_at);
CREATE TABLE channel_messages (
	id INTEGER NOT NULL, 
	direction VARCHAR(8) NOT NULL, 
	channel VARCHAR(32) NOT NULL, 
	party VARCHAR(256) NOT NULL, 
	text TEXT NOT NULL, 
	jorb_id VARCHAR(32), 
	status VARCHAR(16) NOT NULL, 
	reasoning TEXT, 
	is_user INTEGER NOT NULL, 
	external_id VARCHAR(256), 
	thread_key VARCHAR(256), 
	created_at DATETIME NOT NULL, 
	delivered_at DATETIME, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_channel_messages_jorb_id ON channel_messages (jorb_id);
CREATE INDEX ix_channel_messages_created_at ON channel_messages (created_at);
CREATE INDEX ix_channel_messages_party ON channel_messages (party);
CREATE INDEX ix_channel_messages_status ON channel_messages (status);
CREATE TABLE reminders (
	id VARCHAR(40) NOT NULL, 
	series_id VARCHAR(40) NOT NULL, 
	title TEXT NOT NULL, 
	description TEXT, 
	due_date DATETIME NOT NULL, 
	fire_at DATETIME NOT NULL, 
	rrule TEXT, 
	rrule_tz VARCHAR(64), 
	rrule_start VARCHAR(32), 
	due_local VARCHAR(32), 
	project_id VARCHAR(256), 
	priority VARCHAR(8) NOT NULL, 
	status VARCHAR(12) NOT NULL, 
	process_name TEXT, 
	webhook_url TEXT, 
	jorb_id VARCHAR(256), 
	thread_id VARCHAR(256), 
	attempts INTEGER NOT NULL, 
	last_error TEXT, 
	missed_policy VARCHAR(10) NOT NULL, 
	missed_at DATETIME, 
	created_at DATETIME NOT NULL, 
	created_by VARCHAR(512) NOT NULL, 
	updated_at DATETIME NOT NULL, 
	sent_at DATETIME, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_reminders_series_id ON reminders (series_id);
CREATE INDEX ix_reminders_status_fire_at ON reminders (status, fire_at);
CREATE INDEX ix_reminders_created_by_at ON reminders (created_by, created_at);
CREATE TABLE runs (
	id VARCHAR(64) NOT NULL, 
	thread_id VARCHAR(256), 
	graph VARCHAR(64) NOT NULL, 
	started_at DATETIME NOT NULL, 
	duration_ms FLOAT NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	error TEXT, 
	prompt_tokens INTEGER NOT NULL, 
	completion_tokens INTEGER NOT NULL, 
	model_calls INTEGER NOT NULL, 
	model_ms FLOAT NOT NULL, 
	tool_calls INTEGER NOT NULL, 
	tool_errors INTEGER NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_runs_started_at ON runs (started_at);
CREATE INDEX ix_runs_thread_id ON runs (thread_id);
CREATE TABLE disabled_tools (
	name VARCHAR(256) NOT NULL, 
	disabled_at DATETIME NOT NULL, 
	note TEXT, 
	PRIMARY KEY (name)
);
CREATE TABLE channel_state (
	channel VARCHAR(32) NOT NULL, 
	"key" VARCHAR(256) NOT NULL, 
	value TEXT NOT NULL, 
	PRIMARY KEY (channel, "key")
);
CREATE TABLE jorb_contacts (
	jorb_id VARCHAR(32) NOT NULL, 
	party VARCHAR(256) NOT NULL, 
	PRIMARY KEY (jorb_id, party), 
	FOREIGN KEY(jorb_id) REFERENCES jorbs (id) ON DELETE CASCADE
);
CREATE INDEX ix_jorb_contacts_party ON jorb_contacts (party);
CREATE TABLE run_events (
	id INTEGER NOT NULL, 
	run_id VARCHAR(64) NOT NULL, 
	seq INTEGER NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	offset_ms FLOAT NOT NULL, 
	duration_ms FLOAT NOT NULL, 
	ok INTEGER NOT NULL, 
	detail TEXT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE
);
CREATE INDEX ix_run_events_run_id ON run_events (run_id);
