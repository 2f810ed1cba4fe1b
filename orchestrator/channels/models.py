"""Small tables of channel state: polling offsets and the Telegram chat directory."""

from __future__ import annotations

from sqlalchemy import String, Text, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Mapped, Session, mapped_column

from orchestrator.core.config import Settings
from orchestrator.storage.engines import Base, jarvis_engine


class ChannelStateRow(Base):
    __tablename__ = "channel_state"

    channel: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(256), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ChannelState:
    """Per-channel key/value state (the Telegram update offset, handle -> chat id, email thread cursors)."""

    def __init__(self, settings: Settings, channel: str):
        self.engine = jarvis_engine(settings)
        self.channel = channel

    def get(self, key: str, default: str | None = None) -> str | None:
        with Session(self.engine) as s:
            value = s.scalar(select(ChannelStateRow.value).where(ChannelStateRow.channel == self.channel,
                                                                 ChannelStateRow.key == key))
        return default if value is None else value

    def items(self, prefix: str) -> dict[str, str]:
        """Every key starting with `prefix` and its value."""
        with Session(self.engine) as s:
            rows = s.execute(select(ChannelStateRow.key, ChannelStateRow.value).where(
                ChannelStateRow.channel == self.channel, ChannelStateRow.key.startswith(prefix, autoescape=True)))
            return {k: v for k, v in rows}

    def _insert(self, key: str, value: str):
        table = ChannelStateRow.__table__
        if self.engine.dialect.name == "sqlite":
            return sqlite_insert(table).values(channel=self.channel, key=key, value=value)
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).values(channel=self.channel, key=key, value=value)

    def set(self, key: str, value: str) -> None:
        stmt = self._insert(key, value).on_conflict_do_update(index_elements=["channel", "key"], set_={"value": value})
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def release(self, key: str) -> None:
        """Unset a claimed key: the work it stood for did not happen, and the next one to claim it does it."""
        table = ChannelStateRow.__table__
        with self.engine.begin() as conn:
            conn.execute(table.delete().where(table.c.channel == self.channel, table.c.key == key))

    def claim(self, key: str, value: str = "1") -> bool:
        """Set the key only if it is not set yet; True for the one caller (of any worker) that set it."""
        stmt = (self._insert(key, value).on_conflict_do_nothing(index_elements=["channel", "key"])
                .returning(ChannelStateRow.key))
        with self.engine.begin() as conn:
            return conn.execute(stmt).first() is not None
