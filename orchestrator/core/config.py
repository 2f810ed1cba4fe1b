"""Configuration: config/config.yml loaded into pydantic models.

The file is chosen by `--config PATH`, else `$JARVIS_CONFIG`, else `config/config.yml` of the checkout.
Relative paths inside it are resolved against the file's folder, `~` against the user's home.
`profiles:` holds named overlays, merged key by key over the base (`--profile NAME` / `$JARVIS_PROFILE`).
The user's own choices made in the UI (Settings' model switch) live beside it in `<name>.local.yml` (git-ignored),
merged over the file and under the profile: the tracked file is never rewritten, so `git pull` does not conflict.
Unknown keys and bad values fail at start with the file, the key and what was expected.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from integrations.effects import KNOWN_SIDE_EFFECTS

from .account_config import AccountConfig
from .config_base import ConfigError, Mode, SecretValue, _Section
from .config_base import SecretRef as SecretRef  # read from here by the modules that resolve secrets

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "config.yml"


class ModelConfig(_Section):
    provider: Literal["openai", "embedded"] = "openai"
    base_url: str = "http://localhost:1337/v1"
    model: str = "local/llama3"
    api_key: SecretValue = "jan"
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0)
    temperature: float | None = None
    max_tokens: int | None = Field(None, gt=0)
    max_answer_kb: int = Field(32768, gt=0, description="an answer larger than this on the wire is stopped (a server "
                               "that ignores max_tokens streams forever)")
    answer_timeout_s: float = Field(1800.0, gt=0, description="an answer still streaming after this is stopped "
                                    "(timeout_s bounds each read, not the whole answer)")
    progress_every_s: float = Field(5.0, ge=0, description="while a chat answer has not begun, say every this many "
                                    "seconds how long Jarvis has waited and which try it is on (0: never)")
    context_tokens: int | None = Field(None, gt=0, description="the model's context window, for budgets; unset: "
                                       "what the server says (vLLM, llama.cpp: llm/server_window.py), else 8192")
    # provider: embedded (llama.cpp server started as a child process)
    gguf: Path | None = None
    n_ctx: int = Field(4096, gt=0)
    chat_format: str | None = None
    threads: int | None = Field(None, gt=0)
    start_timeout_s: float = Field(120.0, gt=0, description="how long the embedded server (or the `start` command's) "
                                   "may take to answer")
    warm_up: bool = Field(True, description="provider embedded, the primary model: `jarvis run` starts it at once and "
                          "has it read the planner's system text, which every thread's prompt starts with, so the "
                          "first message waits for neither")
    # provider: openai, a server Jarvis starts: `jarvis run` runs this command (no shell) when base_url does not
    # answer, restarts it when it dies and stops it on exit (orchestrator/llm/model_server.py).
    start: list[str] | None = Field(None, description="command that starts this model's server, e.g. "
                                    "[llama-server, -m, ~/models/m.gguf, --port, '8080']")
    notice: str | None = Field(None, description="shown to the user when this model is used (a demo model's warning)")
    server_user: str | None = Field(None, description="the local user whose server this is when it is not you (an "
                                    "Ollama run as its own system user): a server on this machine run by any other "
                                    "user is refused (core/owned_transport.py)")

    @model_validator(mode="after")
    def _embedded_needs_gguf(self) -> "ModelConfig":
        if self.provider == "embedded" and self.gguf is None:
            raise ValueError("provider 'embedded' needs 'gguf: PATH' to a .gguf model file")
        return self

    @model_validator(mode="after")
    def _start_is_a_command(self) -> "ModelConfig":
        if self.start is None:
            return self
        if not self.start or not all(isinstance(a, str) and a and "\0" not in a for a in self.start):
            raise ValueError("'start' is a command as a list of non-empty strings, e.g. [ollama, serve]")
        if self.provider == "embedded":
            raise ValueError("'start' is for an outside server (provider: openai); the embedded model starts itself")
        self.start = [os.path.expanduser(self.start[0]), *self.start[1:]]
        return self


class EmbeddingsConfig(_Section):
    base_url: str = "http://localhost:1337/v1"
    model: str = "text-embedding"
    api_key: SecretValue = "jan"
    timeout_s: float = Field(30.0, gt=0)
    # 64 texts of 4,096 dimensions are about 6 MB of JSON: a larger answer is not vectors (llm/answer_bounds.py)
    max_answer_kb: int = Field(32768, gt=0, description="an embeddings answer larger than this on the wire is stopped")
    answer_timeout_s: float = Field(300.0, gt=0, description="an embeddings answer still arriving after this is stopped")
    server_user: str | None = Field(None, description="as models.<role>.server_user, for the embeddings server")


class ModelsConfig(_Section):
    primary: ModelConfig = Field(default_factory=ModelConfig)
    fallback: bool = Field(True, description="`jarvis run`: when models.primary does not answer, use a local server "
                           "that does (Jan, Ollama, LM Studio, llama.cpp, vLLM) or the built-in model, for that run")
    heavy: ModelConfig | None = None
    embeddings: EmbeddingsConfig | None = None


class AutonomyConfig(_Section):
    default: Mode = "confirm"
    effects: dict[str, Mode] = Field(
        default_factory=lambda: {
            "email_send": "confirm",
            "calendar_write": "confirm",
            "fs_write": "confirm",
            "ui_automation": "confirm",
            "process_start": "confirm",
            "memory_write": "auto",  # the user's own words; escalated to confirm after untrusted content
        }
    )
    escalate_after_untrusted: bool = True
    # After untrusted reads, judge a tool that names its deciding arguments by where their values came from instead
    # of asking before every effect (orchestrator/tools/provenance.py); tools that name none keep the blanket rule.
    argument_provenance: bool = False
    max_side_effects_per_turn: int = Field(20, ge=1)

    @field_validator("effects")
    @classmethod
    def _effect_names(cls, effects: dict[str, Mode]) -> dict[str, Mode]:
        """A name close to a known effect but not one is a typo: `fs_wirte: deny` would leave fs_write on the
        default without a word. Other unknown names stay allowed: MCP servers and generated tools declare their own."""
        for name in effects:
            if name in KNOWN_SIDE_EFFECTS:
                continue
            close = difflib.get_close_matches(name, KNOWN_SIDE_EFFECTS, n=1, cutoff=0.85)  # calendar_read passes
            if close:
                raise ValueError(f"{name!r} is not an effect; did you mean {close[0]!r}? (known: "
                                 f"{', '.join(sorted(KNOWN_SIDE_EFFECTS))}; an effect your own tools declare may be "
                                 "named as they spell it)")
        return effects


class FsConfig(_Section):
    roots: list[Path] = Field(default_factory=lambda: [Path("~")])
    max_read_bytes: int = Field(2_000_000, gt=0)
    max_search_results: int = Field(200, gt=0)


class StorageConfig(_Section):
    data_dir: Path = Path("../data")
    url: str | None = Field(None, description="a SQLAlchemy URL (postgresql://...) replacing the SQLite files")
    keep_checkpoints: int = Field(20, ge=0, description="checkpoints kept per thread after each run (0: all)")
    claim_lease_s: float = Field(300.0, gt=0, description="a worker that dies mid-run frees its jorbs and chat "
                                 "threads after this long (renewed while it runs; at once after a restart here)")


class McpConfig(_Section):
    dir: Path = Path("../mcp")
    restart_backoff_s: float = Field(2.0, gt=0)
    max_restart_backoff_s: float = Field(60.0, gt=0)
    startup_wait_s: float = Field(10.0, ge=0, description="how long the first turn waits for MCP servers to start")
    android_max_steps: int = Field(30, ge=1, description="model steps of one phone task before it gives up")
    max_message_mb: int = Field(16, gt=0, description="a stdio server's longest JSON-RPC line; past it the server "
                                "is restarted")
    max_log_mb: int = Field(8, gt=0, description="a stdio server's stderr kept per run in <data>/mcp/<name>.log")


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    max_upload_mb: int = Field(50, gt=0)
    max_request_kb: int = Field(8192, gt=0, description="the largest API request body (uploads: max_upload_mb)")
    open_browser: bool = False
    # Extra names the UI may be reached by (Host/Origin checks), e.g. a LAN address when host is 0.0.0.0.
    allowed_hosts: list[str] = Field(default_factory=list)


class SandboxConfig(_Section):
    required: bool = True
    backend: Literal["auto", "bubblewrap", "sandbox-exec", "none"] = Field(
        "auto", description="auto: bubblewrap on Linux, sandbox-exec on macOS; none needs required: false")
    cpu_seconds: int = Field(10, gt=0)
    memory_mb: int = Field(1024, gt=0)
    max_processes: int = Field(64, gt=0)
    file_size_mb: int = Field(64, gt=0)
    workdir_mb: int = Field(128, gt=0)
    wall_timeout_s: float = Field(30.0, gt=0)
    output_limit_kb: int = Field(256, gt=0)
    open_files: int = Field(256, gt=0)
    cpu_cores: float = Field(1.0, gt=0, description="the cores a sandboxed run's processes may use at once")
    protocol_limit_mb: int = Field(8, gt=0, description="all a jorb script may write to Jarvis in one run")
    unprivileged_uid: int = Field(65534, gt=0, description="the uid sandboxed code runs as when Jarvis runs as root")


class PlannerConfig(_Section):
    max_steps: int = Field(12, ge=1, description="planner calls in one turn before it is stopped")
    max_tool_calls_per_answer: int = Field(10, ge=1, description="tool calls of one model answer that are run; "
                                           "the rest are refused with a note to the model")
    max_bound_tools: int = Field(12, ge=1, description="tools chosen for a request when the catalog has more")
    max_thread_tools: int | None = Field(None, ge=1, description="tools a thread keeps bound from request to request "
                                         "(so a server reuses the prompt's prefix); default 3 x max_bound_tools")
    history_token_budget: int = Field(6000, ge=500)
    instructions: str | None = None


class JarbConfig(_Section):
    enabled: bool = Field(True, description="false: the planner is not offered create_new_tool (small models, or "
                          "when you do not want Jarvis to write tools); registered tools still work")
    max_repairs: int = Field(3, ge=0)
    trust_after: int = Field(3, ge=0)
    call_timeout_s: float = Field(20.0, gt=0)


class PdfConfig(_Section):
    chunk_tokens: int = Field(3000, ge=200)
    max_summary_chunks: int = Field(200, ge=1)
    time_budget_s: float = Field(120.0, gt=0, description="longest time spent reading one PDF before giving up")
    max_extract_chars: int = Field(30_000, ge=1000, description="pdf_extract_text returns at most this much text")


class YoutubeConfig(_Section):
    languages: list[str] = Field(default_factory=lambda: ["en"])
    chunk_tokens: int = Field(3000, ge=200)
    timeout_s: float = Field(20.0, gt=0)


class GoogleConfig(_Section):
    client_secrets: Path | None = None
    account: str = "default"
    gmail_base_url: str = "https://gmail.googleapis.com"
    calendar_base_url: str = "https://www.googleapis.com"
    token_uri: str | None = None
    calendar_id: str = "primary"
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(4, ge=0, description="retries of a request Google rate-limited (429) or failed (5xx)")
    backoff_s: float = Field(1.0, ge=0, description="first wait before a retry; doubles each time")


class JorbsConfig(_Section):
    max_steps_per_hour: int = Field(20, ge=1)
    max_steps_per_day: int = Field(100, ge=1)
    token_budget: int = Field(200_000, ge=1000)
    max_malformed: int = Field(2, ge=0)
    script_timeout_s: float = Field(60.0, gt=0)
    sweep_interval_s: float = Field(30.0, gt=0, description="how often `jarvis run` wakes jorbs whose reply came in "
                                    "while another worker held them, and jorbs whose model retry is due")
    model_retry_first_s: float = Field(60.0, gt=0, description="a jorb whose model is down (unreachable, busy, timed "
                                       "out) waits this long before it tries again; the wait doubles each time")
    model_retry_max_s: float = Field(3600.0, gt=0, description="the longest wait between two tries")
    model_retry_for_h: float = Field(24.0, ge=0, description="after the model has been down this long, the jorb "
                                     "stops trying and waits for the user (0: never try again by itself)")


class TelegramConfig(_Section):
    enabled: bool = False
    token: SecretValue = None
    api_base: str = "https://api.telegram.org"
    allowlist: list[str] = Field(default_factory=list)
    poll_timeout_s: int = Field(30, ge=0)
    chat: bool = Field(True, description="your own conversation with Jarvis in your private chat with the bot (you: "
                                         "a telegram:<id> or @handle of channels.user_identities)")
    chat_per_minute: int = Field(20, ge=1, description="your messages taken per minute in one chat; more are refused")
    edit_every_s: float = Field(1.0, ge=0.2, description="the answer shown as it is written: one edit at most this often")


class MatrixConfig(_Section):
    enabled: bool = False
    homeserver: str = Field("", description="the bot account's homeserver, e.g. https://matrix.example.org")
    user_id: str = Field("", description="the bot account, e.g. @jarvis:example.org (you invite it to a room of "
                                         "your own; you: a matrix:@you:example.org of channels.user_identities)")
    access_token: SecretValue = Field(None, description="the bot's access token ({secret: NAME}), or use password")
    password: SecretValue = Field(None, description="the bot's password ({secret: NAME}), when no access_token")
    sync_timeout_s: int = Field(30, ge=0, description="how long one sync waits on the homeserver for new events")
    chat_per_minute: int = Field(20, ge=1, description="your messages taken per minute in one room; more are refused")
    max_message_chars: int = Field(20_000, ge=1, le=100_000, description="a longer message is refused with why (a "
                                   "homeserver takes events of up to 64 KiB; long text goes in a file in the web UI)")
    edit_every_s: float = Field(1.0, ge=0.2, description="the answer shown as it is written: one edit at most this often")

    @model_validator(mode="after")
    def _usable(self) -> "MatrixConfig":
        if self.enabled and not (self.homeserver and self.user_id and (self.access_token or self.password)):
            raise ValueError("channels.matrix needs homeserver, user_id and access_token or password "
                             "(each a {secret: NAME}) when enabled")
        if self.user_id and not (self.user_id.startswith("@") and ":" in self.user_id):
            raise ValueError("channels.matrix.user_id is a full Matrix id: @name:server")
        return self


class EmailChannelConfig(_Section):
    enabled: bool = False
    poll_interval_s: float = Field(60.0, gt=0)
    account: str | None = Field(None, description="an IMAP account of accounts: the channel sends and reads through "
                                "(a sender verified by its authserv_id); default: Gmail")
    chat: bool = Field(False, description="your own conversation with Jarvis by email: a mail to Jarvis's address "
                                          "from an address of channels.user_identities (as its mail server verified it) is "
                                          "answered in the same email thread")
    chat_per_minute: int = Field(20, ge=1, description="your mails taken per minute as your conversation; more "
                                 "are refused (said once a minute)")


class ChannelsConfig(_Section):
    local: bool = True
    email: EmailChannelConfig = Field(default_factory=EmailChannelConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    burst_window_s: float = Field(20.0, ge=0)
    send_per_minute: int = Field(20, ge=1)
    route_min_confidence: float = Field(0.7, ge=0, le=1)
    # Inbound messages the rules cannot place cost a model call each, made on the channel's poller: past this many
    # a minute (a flood from strangers) they go to the inbox unjudged, so approvals on that poller are not held up.
    judge_per_minute: int = Field(10, ge=1)
    user_identities: list[str] = Field(default_factory=list,
                                       description="your own addresses: a message from one of them is your intervention "
                                                   "(an email only when Gmail verified its From:; on Telegram prefer "
                                                   "telegram:<your numeric user id> to a @handle, which can change hands: "
                                                   "a @handle stands for the account it was first seen with)")
    default_region: str = Field("US", description="phone numbers without a country code are read in this region")


class NotifyConfig(_Section):
    """Where a confirmation no UI is watching is sent, so it can be answered from a phone (orchestrator/approvals)."""

    to: list[Literal["telegram", "email"]] = Field(default_factory=list, description="telegram, email, both, or "
                                                   "none (the default): the confirmation waits for the UI")
    telegram_user_id: int | None = Field(None, description="your numeric Telegram user id: the message goes to "
                                         "your chat with the bot, and only a press from this id answers")
    email: str | None = Field(None, description="your address: the message goes there, and only a reply Gmail "
                                                "verified as from it answers")
    after_s: float = Field(300.0, ge=0, description="send once the item has waited this long unseen by the UI")
    effects: list[str] = Field(default_factory=list, description="only confirmations of these side effects "
                                                                 "(empty: all)")
    check_s: float = Field(15.0, gt=0, description="how often pending items are looked at")
    ui_url: str | None = Field(None, description="the web UI's address, for the 'edit in the UI' link")

    @model_validator(mode="after")
    def _addresses(self) -> "NotifyConfig":
        if "telegram" in self.to and self.telegram_user_id is None:
            raise ValueError("to: telegram needs telegram_user_id (your numeric user id; @userinfobot tells it)")
        if "email" in self.to and not (self.email and "@" in self.email):
            raise ValueError("to: email needs email: your address")
        return self


class ConfirmationsConfig(_Section):
    notify: NotifyConfig = Field(default_factory=NotifyConfig)


class SchedulerConfig(_Section):
    enabled: bool = True
    tick_s: float = Field(1.0, gt=0)
    max_creates_per_hour: int = Field(60, ge=1)
    max_attempts: int = Field(5, ge=1)
    ack_timeout_s: float = Field(10.0, gt=0)
    webhook_timeout_s: float = Field(10.0, gt=0)
    webhook_tries: int = Field(3, ge=1, description="POSTs within one attempt before it counts as failed")
    retry_backoff_s: float = Field(5.0, gt=0, description="first wait after a failed attempt; doubles each time")
    max_backoff_s: float = Field(300.0, gt=0)
    missed_policy: Literal["catch_up", "skip", "ask"] = "catch_up"
    missed_grace_s: float = Field(60.0, ge=0, description="later than this after its time, a reminder was missed")
    lease_s: float = Field(300.0, gt=0, description="a delivery cut off by a crash is retried after this long")
    defer_s: float = Field(30.0, gt=0, description="wait while a chat thread is busy (running or confirming)")
    workers: int = Field(4, ge=1, description="deliveries in parallel")
    batch_size: int = Field(200, ge=1, description="reminders taken per tick")
    chat_thread: str = Field("reminders", min_length=1, description="thread for reminders with no other target")
    agents_may_target: list[str] = Field(
        default_factory=list,
        description="what an agent program's own reminders may fire into besides the agent itself: other agent "
                    "programs (paths) and webhook URLs (each a prefix: scheme, host and port exact, then the path)")


class DocsConfig(_Section):
    auto_index: bool = True
    chunk_chars: int = Field(1500, ge=200)


class MemoryConfig(_Section):
    """What Jarvis remembers about the user across threads (orchestrator/memory/)."""

    enabled: bool = Field(True, description="false: no memory tools, nothing read before planning, nothing stored")
    kinds: list[str] = Field(default_factory=lambda: ["person", "organisation", "place", "project", "event",
                                                      "document", "account", "thing", "topic"],
                             description="the entity kinds facts may be about (add your own)")
    prompt_token_budget: int = Field(400, ge=0, description="tokens of remembered facts put before the planner")
    prompt_max_facts: int = Field(10, ge=0, le=50)
    propose_from_turns: bool = Field(False, description="after each turn, ask the model for facts worth remembering "
                                     "in the user's message; they wait as proposals for the user's yes (one more "
                                     "model call per turn)")
    min_similarity: float = Field(0.3, ge=-1, le=1, description="a fact whose vector is less similar to the "
                                  "message than this is not found by meaning (keywords still find it)")


class McpServerConfig(_Section):
    """Jarvis as an MCP server for the user's other agents (orchestrator/mcp_server/): off unless enabled, and
    then only the tools listed here, every call under Jarvis's own policy, taint rules and ledger."""

    enabled: bool = Field(False, description="serve MCP: `jarvis mcp serve` (stdio) and `path` under `jarvis run`")
    path: str = Field("/mcp", pattern=r"^/[a-z0-9_-]+$", description="the streamable HTTP endpoint under `jarvis run`")
    tools: list[str] = Field(
        default_factory=lambda: ["memory_search", "docs_search", "gcal_list_events", "gmail_search", "jarvis_status"],
        description="what clients may call: ask_jarvis (a turn in a thread of the client), jarvis_status, and "
                    "Jarvis's tools by name (jorb_create, ...); the default reads only")
    resources: bool = Field(True, description="remembered facts and indexed documents also as MCP resources")
    calls_per_minute: int = Field(60, ge=1, description="each client's calls (and HTTP requests) per minute")
    wait_s: float = Field(20.0, ge=0, description="how long a call waits for Jarvis's answer before it returns "
                          "a pending id to poll with jarvis_status (stay under the client's own timeout)")


class BackupConfig(_Section):
    """Backups made by `jarvis run` (orchestrator/backup/schedule.py); `jarvis backup create` makes one any time."""

    every: Literal["hourly", "daily", "weekly"] | None = Field(None, description="how often; unset: never by "
                                                                "itself")
    keep: int = Field(7, ge=1, description="backups kept in the folder; older ones made by the schedule go")
    to: Path | None = Field(None, description="the folder (default: <data folder>-backups beside the data folder); "
                            "one that does not exist (a disk not mounted) skips the backup, it is not made")


class VoiceConfig(_Section):
    """Speech in and out (orchestrator/voice/): engines by name, and the bounds on what they are given."""

    enabled: bool = True
    stt: Literal["faster-whisper", "pocketsphinx"] = Field(
        "faster-whisper", description="the speech recogniser; faster-whisper falls back to pocketsphinx where it or "
        "its model is not installed")
    whisper_model: Path | None = Field(None, description="faster-whisper's model folder (CTranslate2); unset: "
                                       "data/models/whisper-base, which `make whisper-model` fetches")
    tts: Literal["espeak-ng"] = Field("espeak-ng", description="the speech synthesizer")
    language: str = Field("en-us", description="what the recogniser listens for")
    voice: str = Field("en-us+edward", description="eSpeak NG voice[+variant]; `espeak-ng --voices` lists them")
    rate_wpm: int = Field(160, ge=80, le=450, description="speaking rate, words per minute")
    max_audio_mb: int = Field(5, gt=0, description="the largest recording accepted")
    max_audio_s: float = Field(60.0, gt=0, description="the longest recording accepted")
    max_speak_chars: int = Field(4000, gt=0, description="the longest text spoken in one request")
    send_transcript: bool = Field(False, description="web UI: send what was heard at once instead of putting it "
                                  "in the message box to check first")


class Settings(_Section):
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    autonomy: AutonomyConfig = Field(default_factory=AutonomyConfig)
    fs: FsConfig = Field(default_factory=FsConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    tools_dir: Path = Path("../tools")
    mcp: McpConfig = Field(default_factory=McpConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    planner: PlannerConfig = Field(default_factory=PlannerConfig)
    jarb: JarbConfig = Field(default_factory=JarbConfig)
    pdf: PdfConfig = Field(default_factory=PdfConfig)
    youtube: YoutubeConfig = Field(default_factory=YoutubeConfig)
    google: GoogleConfig = Field(default_factory=GoogleConfig)
    accounts: dict[str, AccountConfig] = Field(default_factory=dict, description="mail (kind: imap, the "
                                               "default), calendar (caldav) and contacts (carddav) accounts by name "
                                               "(jarvis accounts add); the first of a kind is its default")
    jorbs: JorbsConfig = Field(default_factory=JorbsConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    confirmations: ConfirmationsConfig = Field(default_factory=ConfirmationsConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    docs: DocsConfig = Field(default_factory=DocsConfig)
    voice: VoiceConfig = Field(default_factory=VoiceConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    mcp_server: McpServerConfig = Field(default_factory=McpServerConfig)


    backup: BackupConfig = Field(default_factory=BackupConfig)
    timezone: str | None = Field(None, description="IANA zone for the user's times; default: the system's")
    log_level: str = "INFO"
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)

    # Set by the loader, not by the file.
    source_path: Path | None = Field(None, exclude=True)
    profile: str | None = Field(None, exclude=True)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}; use an IANA name such as 'Europe/Paris'") from None
        return value

    # Convenience paths ---------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.storage.data_dir

    def data_path(self, name: str) -> Path:
        self.storage.data_dir.mkdir(parents=True, exist_ok=True)
        return self.storage.data_dir / name


_PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("storage", "data_dir"),
    ("tools_dir",),
    ("mcp", "dir"),
    ("google", "client_secrets"),
    ("backup", "to"),
    ("models", "primary", "gguf"),
    ("models", "heavy", "gguf"),
)


def _deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _resolve_path(value: Path, base_dir: Path) -> Path:
    expanded = Path(os.path.expanduser(str(value)))
    return expanded if expanded.is_absolute() else (base_dir / expanded).resolve()


def _format_validation_error(path: Path | str, err: ValidationError) -> str:
    lines = [f"{path}: invalid configuration"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {key}: unknown key (check its spelling; see config/config.yml for the known keys)")
        else:
            got = e.get("input")
            got_text = f" (got {got!r})" if not isinstance(got, dict | list) and got is not None else ""
            lines.append(f"  {key}: {e['msg']}{got_text}")
    return "\n".join(lines)


def config_path_from_env(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get("JARVIS_CONFIG")
    if env:
        return Path(env).expanduser().resolve()
    return DEFAULT_CONFIG_PATH


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: YAML keeps the last one silently, so a
    second `jarb:` (or an `autonomy:` pasted below the first) would undo the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice in one mapping (lines {seen[key]} and {line}); "
                    "YAML would keep only the last: keep one", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def local_overlay_path(cfg_path: Path) -> Path:
    """The user's own settings beside the config file: config/config.yml -> config/config.local.yml."""
    return cfg_path.with_name(f"{cfg_path.stem}.local.yml")


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader) or {}  # noqa: S506 - safe
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {type(raw).__name__}")
    return raw


def load_settings(path: str | os.PathLike[str] | None = None, profile: str | None = None) -> Settings:
    """Load, overlay the user's local file and the profile, validate and resolve paths. Raises ConfigError with a
    readable message."""
    cfg_path = config_path_from_env(path)
    if not cfg_path.exists():
        raise ConfigError(f"{cfg_path}: configuration file not found (pass --config PATH or set JARVIS_CONFIG)")
    raw = _read_mapping(cfg_path)

    profile = profile or os.environ.get("JARVIS_PROFILE") or None
    data = dict(raw)
    local = local_overlay_path(cfg_path)
    if local.is_file():
        mine = _read_mapping(local)
        if "profiles" in mine:
            raise ConfigError(f"{local}: profiles belong in {cfg_path.name}, not in the local file")
        data = _deep_merge(data, mine)
    if profile:
        profiles = raw.get("profiles") or {}
        if profile not in profiles:
            known = ", ".join(sorted(profiles)) or "none defined"
            raise ConfigError(f"{cfg_path}: profile {profile!r} not found under 'profiles' (known: {known})")
        overlay = profiles[profile] or {}
        if not isinstance(overlay, dict):
            raise ConfigError(f"{cfg_path}: profiles.{profile} must be a mapping")
        if "profiles" in overlay:
            raise ConfigError(f"{cfg_path}: profiles.{profile}: a profile cannot define profiles")
        data = _deep_merge(data, overlay)

    try:
        settings = Settings.model_validate(data)
    except ValidationError as err:
        where = f"{cfg_path} (with {local.name})" if local.is_file() else cfg_path
        raise ConfigError(_format_validation_error(where, err)) from None
    return finalize_settings(settings, cfg_path.parent, source_path=cfg_path, profile=profile)


def finalize_settings(
    settings: Settings, base_dir: Path, *, source_path: Path | None = None, profile: str | None = None
) -> Settings:
    """Resolve relative paths against base_dir (the config file's folder)."""
    for keys in _PATH_KEYS:
        owner: Any = settings
        for k in keys[:-1]:
            owner = getattr(owner, k)
            if owner is None:
                break
        if owner is None:
            continue
        value = getattr(owner, keys[-1])
        if value is not None:
            setattr(owner, keys[-1], _resolve_path(value, base_dir))
    settings.fs.roots = [_resolve_path(r, base_dir) for r in settings.fs.roots]
    settings.source_path = source_path
    settings.profile = profile
    return settings


def settings_from_dict(data: dict[str, Any], base_dir: str | os.PathLike[str]) -> Settings:
    """Build settings from a mapping (tests, the Python API); paths are relative to base_dir."""
    try:
        settings = Settings.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(Path(str(base_dir)) / "(dict)", err)) from None
    return finalize_settings(settings, Path(base_dir).resolve())
