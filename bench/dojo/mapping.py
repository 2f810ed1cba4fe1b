"""The reviewed mapping of AgentDojo's tools to Jarvis's tool metadata: the one place that says what each tool
changes, whether its output is outside content, and which of its arguments decide an effect.

Rules followed (review each new row against them):
  - untrusted: the output can hold text or values a third party wrote (mail, calendar invitations, shared files,
    chat channels, web pages, reviews, listings, transaction subjects). Only the user's own account data that
    nobody else writes into is trusted: the date, the balance, the own IBAN and profile. The runner checks this at
    run time: a trusted tool whose result holds an injection is counted as a mapping leak and printed.
  - effects: every tool that changes the environment, named by what it changes; effects Jarvis's vocabulary lacks
    get new names (they take autonomy.default, which asks in the default config).
  - deciding: the arguments that choose where an effect goes or what it touches (recipients, ids, files, URLs,
    amounts, dates, hotels, passwords); the rest (bodies, subjects, titles) are content. A calendar event's end
    is content (its start chooses the slot, on the user's own calendar); a booking's end day is not (it is paid).
  - opaque: deciding arguments that are ids (email, event, file, transaction ids).
  - sensitive: outputs holding the user's private records (passport, card numbers).
  - a tool missing here is effectful, untrusted and undecided, as an unannotated MCP tool is.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolSpec:
    effects: tuple[str, ...] = ()
    untrusted: bool = True
    deciding: tuple[str, ...] | None = None  # None: provenance cannot judge it (the blanket rule applies)
    sends_out: bool = False  # carries data off the machine without declaring a sending effect
    opaque: tuple[str, ...] = ()  # deciding ids: trusted only from a trusted tool's result, not the user's prose
    sensitive: bool = False  # the output holds the user's private records (passport, card and account numbers)


UNMAPPED = ToolSpec(effects=("unmapped_tool",), untrusted=True, deciding=None)

_READ = ToolSpec()  # reads outside content
_OWN = ToolSpec(untrusted=False)  # reads the user's own data

_EMAIL = ToolSpec(effects=("email_send",), deciding=("recipients", "cc", "bcc", "attachments"))
_EVENT = ToolSpec(effects=("calendar_write",), deciding=("participants", "start_time"))
_CANCEL_EVENT = ToolSpec(effects=("calendar_write",), deciding=("event_id",), opaque=("event_id",))

MAPPING: dict[str, ToolSpec] = {
    # workspace: email, calendar, cloud drive
    "send_email": _EMAIL,
    "delete_email": ToolSpec(effects=("email_delete",), deciding=("email_id",), opaque=("email_id",)),
    "get_unread_emails": _READ,
    "get_sent_emails": _READ,
    "get_received_emails": _READ,
    "get_draft_emails": _READ,
    "search_emails": _READ,
    "search_contacts_by_name": _READ,  # the contacts are built from mail others sent
    "search_contacts_by_email": _READ,
    "get_current_day": _OWN,
    "search_calendar_events": _READ,  # invitations are written by their senders
    "get_day_calendar_events": _READ,
    "create_calendar_event": _EVENT,
    "cancel_calendar_event": _CANCEL_EVENT,
    "reschedule_calendar_event": ToolSpec(effects=("calendar_write",),
                                          deciding=("event_id", "new_start_time"), opaque=("event_id",)),
    "add_calendar_event_participants": ToolSpec(effects=("calendar_write",), deciding=("event_id", "participants"),
                                                opaque=("event_id",)),
    "append_to_file": ToolSpec(effects=("cloud_drive_write",), deciding=("file_id",), opaque=("file_id",)),
    "search_files_by_filename": _READ,
    "create_file": ToolSpec(effects=("cloud_drive_write",), deciding=("filename",)),
    "delete_file": ToolSpec(effects=("cloud_drive_write",), deciding=("file_id",), opaque=("file_id",)),
    "get_file_by_id": _READ,
    "list_files": _READ,
    "share_file": ToolSpec(effects=("file_share",), deciding=("file_id", "email", "permission"), sends_out=True,
                            opaque=("file_id",)),
    "search_files": _READ,
    # travel
    "get_user_information": ToolSpec(untrusted=False, sensitive=True),  # passport, card number
    "get_all_hotels_in_city": _READ,
    "get_hotels_prices": _READ,
    "get_rating_reviews_for_hotels": _READ,
    "get_hotels_address": _READ,
    "get_all_restaurants_in_city": _READ,
    "get_cuisine_type_for_restaurants": _READ,
    "get_restaurants_address": _READ,
    "get_rating_reviews_for_restaurants": _READ,
    "get_dietary_restrictions_for_all_restaurants": _READ,
    "get_contact_information_for_restaurants": _READ,
    "get_price_for_restaurants": _READ,
    "check_restaurant_opening_hours": _READ,
    "get_all_car_rental_companies_in_city": _READ,
    "get_car_types_available": _READ,
    "get_rating_reviews_for_car_rental": _READ,
    "get_car_fuel_options": _READ,
    "get_car_rental_address": _READ,
    "get_car_price_per_day": _READ,
    "get_flight_information": _READ,
    "reserve_hotel": ToolSpec(effects=("booking",), deciding=("hotel", "start_day", "end_day")),
    "reserve_car_rental": ToolSpec(effects=("booking",), deciding=("company", "start_time", "end_time")),
    "reserve_restaurant": ToolSpec(effects=("booking",), deciding=("restaurant", "start_time")),
    # banking
    "get_iban": _OWN,
    "get_balance": _OWN,
    "get_user_info": ToolSpec(untrusted=False, sensitive=True),
    "get_most_recent_transactions": _READ,  # subjects are written by whoever paid the user
    "get_scheduled_transactions": _READ,
    "read_file": _READ,  # bills and letters from others
    "send_money": ToolSpec(effects=("payment",), deciding=("recipient", "amount", "date"), sends_out=True),
    "schedule_transaction": ToolSpec(effects=("payment",), deciding=("recipient", "amount", "date", "recurring"),
                                     sends_out=True),
    "update_scheduled_transaction": ToolSpec(effects=("payment",),
                                             deciding=("id", "recipient", "amount", "date", "recurring"),
                                             sends_out=True, opaque=("id",)),
    "update_password": ToolSpec(effects=("account_write",), deciding=("password",)),
    "update_user_info": ToolSpec(effects=("account_write",), deciding=("first_name", "last_name", "street", "city")),
    # slack
    "get_channels": _READ,  # channel names are chosen by other members
    "get_users_in_channel": _READ,
    "read_channel_messages": _READ,
    "read_inbox": _READ,
    "add_user_to_channel": ToolSpec(effects=("workspace_admin",), deciding=("user", "channel")),
    "send_direct_message": ToolSpec(effects=("message_send",), deciding=("recipient",)),
    "send_channel_message": ToolSpec(effects=("message_send",), deciding=("channel",)),
    "invite_user_to_slack": ToolSpec(effects=("workspace_admin",), deciding=("user", "user_email")),
    "remove_user_from_slack": ToolSpec(effects=("workspace_admin",), deciding=("user",)),
    "get_webpage": ToolSpec(deciding=("url",), sends_out=True),  # fetching a URL can carry data in it
    "post_webpage": ToolSpec(effects=("network",), deciding=("url",)),
}

# Every effect name used above, so the all-auto configuration can name them all.
EFFECTS: frozenset[str] = frozenset(e for spec in (*MAPPING.values(), UNMAPPED) for e in spec.effects)


def spec_for(name: str) -> ToolSpec:
    return MAPPING.get(name, UNMAPPED)
