"""Small talk that is true and short: social turns are part of the grammar, with varied replies.

Greetings, thanks, "how are you", good night, "who are you", "what can you do", a joke:
each is a local intent (``DuplexHub...``) with templates in Home Assistant's style, so it
is matched like a home command (also by the speech grammar) and never reaches the LLM.
Replies rotate through a few wordings; a greeting follows the real time of day. Local
intents are answered by the hub itself and never published.
"""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any, Final

LOCAL_PREFIX: Final = "DuplexHub"

INTENTS: Final[dict[str, Any]] = {
    "DuplexHubGreeting": {"data": [{"sentences": [
        "good (morning|afternoon|evening|day)", "(hey|hi|hello) there", "howdy", "greetings", "hiya", "yo",
    ]}]},
    "DuplexHubThanks": {"data": [{"sentences": [
        "(thank you|thanks) [(very|so) much] [for (that|your help|the help|helping)]",
        "many thanks", "cheers", "much appreciated", "(great|nice|good) job", "well done", "(perfect|awesome|great)",
    ]}]},
    "DuplexHubHowAreYou": {"data": [{"sentences": [
        "how are you [doing] [today|tonight|this (morning|afternoon|evening)]", "(how is|how's) it going",
        "how are things", "how do you do", "are you (ok|okay|alright|all right)", "how have you been",
        "what's up", "whats up", "what is up",
    ]}]},
    "DuplexHubGoodNight": {"data": [{"sentences": [
        "good night", "night night", "(I'm|I am|im) (going|heading|off) to bed [now]", "time (for|to go to) bed",
        "sleep well", "(I'm|I am|im) going to sleep [now]",
    ]}]},
    "DuplexHubGoodbye": {"data": [{"sentences": [
        "(goodbye|good bye|bye|bye bye)", "see you [later|soon|tomorrow]", "talk to you later",
    ]}]},
    "DuplexHubWhoAreYou": {"data": [{"sentences": [
        "who are you", "(what is|what's) your name", "whats your name", "what are you", "introduce yourself",
    ]}]},
    "DuplexHubHelp": {"data": [{"sentences": [
        "what can you do", "what (do|can) you (know|understand)", "help [me]", "how (do|does) this work",
        "what are you able to do",
    ]}]},
    # answers to the hub's own questions (in the grammar, so that they are heard well)
    "DuplexHubYes": {"data": [{"sentences": [
        "(yes|yeah|yep|yup|sure|okay|ok|correct|absolutely|definitely) [please|do it|go ahead]", "please do",
        "go ahead", "do it",
    ]}]},
    "DuplexHubNo": {"data": [{"sentences": [
        "(no|nope|nah) [thanks|thank you|don't]", "don't", "do not", "leave it", "forget it", "not now",
    ]}]},
    "DuplexHubArea": {"data": [{"sentences": ["[in] [the] {area} [please]"]}]},
    "DuplexHubJoke": {"data": [{"sentences": [
        "tell me a joke", "tell (me|us) another [one|joke]", "(say|tell me) something funny", "make me laugh",
        "do you know (a|any) jokes", "[I want] [to] hear a joke",
    ]}]},
}

HELP: Final = ("I can switch your lights and devices, open and close covers, lock doors, set timers, "
               "add things to your lists, play and pause media, and tell you the weather, the time and "
               "the temperature. And you can talk over me at any time: I stop and listen.")
REPLIES: Final[dict[str, tuple[str, ...]]] = {
    "DuplexHubThanks": ("You're welcome.", "Any time.", "Glad to help.", "My pleasure."),
    "DuplexHubHowAreYou": ("I'm doing well, thanks. How can I help?", "All good here. What can I do for you?",
                           "Very well, thank you. Anything I can do?"),
    "DuplexHubGoodNight": ("Good night. Sleep well.", "Sleep well.", "Good night."),
    "DuplexHubGoodbye": ("Goodbye.", "Bye for now.", "See you."),
    "DuplexHubWhoAreYou": ("I'm your home's voice assistant. I run right here, on this device.",
                           "I'm Duplex Hub, the voice of your home. Everything I hear stays here."),
    "DuplexHubHelp": (HELP,),
    "DuplexHubJoke": (
        "Why did the scarecrow win an award? Because he was outstanding in his field.",
        "I told my thermostat a joke. It didn't warm up to it.",
        "Why don't skeletons fight each other? They don't have the guts.",
        "What do you call a fake noodle? An impasta.",
        "Why did the light bulb fail school? It wasn't very bright.",
    ),
}


ANSWERS: Final = frozenset({"DuplexHubYes", "DuplexHubNo", "DuplexHubArea"})  # only after a question


def is_local(intent_name: str) -> bool:
    """Whether the hub answers this intent itself (never published)."""
    return intent_name.startswith(LOCAL_PREFIX)


class SmallTalk:
    """Replies to social turns, varied, and true to the time of day."""

    def __init__(self) -> None:
        """Start each kind of reply at its first wording."""
        self._turns: dict[str, itertools.cycle[str]] = {k: itertools.cycle(v) for k, v in REPLIES.items()}

    def reply(self, intent_name: str, now: dt.datetime | None = None) -> str:
        """The reply to a local intent."""
        if intent_name == "DuplexHubGreeting":
            hour = (now or dt.datetime.now()).hour
            part = "morning" if 5 <= hour < 12 else "afternoon" if 12 <= hour < 18 else "evening"
            return f"Good {part}! What can I do for you?"
        turns = self._turns.get(intent_name)
        return next(turns) if turns is not None else ""
