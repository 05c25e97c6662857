"""The poisoning alarm of ``audit``: tools whose learned field looks written by few hands.

Two signs, each worth a look rather than a proof (``tool-index learned NAME`` then shows who
taught what, ``learned --forget-identity`` undoes an identity):

- **Few identities, many sessions.** At least ``ALARM_SESSIONS`` sessions taught the tool, and
  ``ALARM_SESSIONS_PER_IDENTITY`` or more per identity that did: one writer repeating itself.
  Only on an index where more than one identity taught anything: on a single-user host every
  tool is taught so, by its one user.
- **Learned terms that outnumber the text's.** More terms than one call can teach
  (``TERMS_PER_CALL``), and at least ``ALARM_TERMS_RATIO`` times the distinct terms of the tool's
  own text: a tool becoming a hub for words that are not its own.

A tool whose MCP annotations say ``destructiveHint: true`` is marked: steering to one is what pays
an attacker most, which is why its terms need 2K identities to be shared.
"""

from __future__ import annotations

from dataclasses import dataclass

from discovery._sessions.learning import TERMS_PER_CALL, destructive
from store import Reader

ALARM_SESSIONS = 10
"""Sessions that taught a tool from which few identities behind them are a sign."""
ALARM_SESSIONS_PER_IDENTITY = 5
"""Sessions per teaching identity from which a tool's teaching looks like one writer repeating."""
ALARM_TERMS_RATIO = 4
"""Learned terms per distinct term of the tool's text from which the learned field is a sign."""

FEW_IDENTITIES = "few identities, many sessions"
MANY_TERMS = "learned terms outnumber its text's"


@dataclass(frozen=True, slots=True)
class LearningAlarm:
    """A tool the alarm names: who taught it, how much, and why it is named."""

    name: str
    identities: int
    sessions: int
    learned_terms: int
    text_terms: int
    destructive: bool
    reasons: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "identities": self.identities,
            "sessions": self.sessions,
            "learned_terms": self.learned_terms,
            "text_terms": self.text_terms,
            "destructive": self.destructive,
            "reasons": list(self.reasons),
        }


def learning_alarms(reader: Reader) -> list[LearningAlarm]:
    """The tools the alarm names, destructive ones first, then by name."""
    counts = reader.learning.teaching()
    if not counts:
        return []
    several = reader.learning.teaching_identities() > 1
    tools = reader.catalog.tools_by_names([count.tool_name for count in counts])
    text_terms = reader.index.term_ids_of_tools([tool.id for tool in tools.values()])
    found: list[LearningAlarm] = []
    for count in counts:
        tool = tools.get(count.tool_name)
        text = 0 if tool is None else len(text_terms.get(tool.id, ()))
        reasons = []
        if (
            several
            and count.sessions >= ALARM_SESSIONS
            and count.sessions >= ALARM_SESSIONS_PER_IDENTITY * count.identities
        ):
            reasons.append(FEW_IDENTITIES)
        if count.terms > TERMS_PER_CALL and count.terms >= ALARM_TERMS_RATIO * text:
            reasons.append(MANY_TERMS)
        if reasons:
            found.append(
                LearningAlarm(
                    count.tool_name,
                    count.identities,
                    count.sessions,
                    count.terms,
                    text,
                    destructive(tool),
                    tuple(reasons),
                )
            )
    return sorted(found, key=lambda alarm: (not alarm.destructive, alarm.name))
