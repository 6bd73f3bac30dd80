"""A grammar-tutor corpus: sentences that drill verb conjugation, made from templates."""

from __future__ import annotations

import random

# verb: (base, third person, past, past participle, -ing, objects)
VERBS = {
    "walk": ("walk", "walks", "walked", "walked", "walking", ["to school", "home", "in the park"]),
    "play": ("play", "plays", "played", "played", "playing", ["chess", "the piano", "football"]),
    "cook": ("cook", "cooks", "cooked", "cooked", "cooking", ["dinner", "rice", "soup"]),
    "clean": ("clean", "cleans", "cleaned", "cleaned", "cleaning", ["the room", "the kitchen"]),
    "study": ("study", "studies", "studied", "studied", "studying", ["grammar", "history", "maths"]),
    "watch": ("watch", "watches", "watched", "watched", "watching", ["a film", "the news"]),
    "open": ("open", "opens", "opened", "opened", "opening", ["the door", "the window"]),
    "help": ("help", "helps", "helped", "helped", "helping", ["the teacher", "a friend"]),
    "go": ("go", "goes", "went", "gone", "going", ["to school", "home", "to the market"]),
    "eat": ("eat", "eats", "ate", "eaten", "eating", ["an apple", "bread", "lunch"]),
    "see": ("see", "sees", "saw", "seen", "seeing", ["the sea", "a bird", "the teacher"]),
    "take": ("take", "takes", "took", "taken", "taking", ["the bus", "a photo", "the book"]),
    "give": ("give", "gives", "gave", "given", "giving", ["a present", "an answer"]),
    "make": ("make", "makes", "made", "made", "making", ["a cake", "a plan", "tea"]),
    "read": ("read", "reads", "read", "read", "reading", ["a book", "the letter", "the news"]),
    "speak": ("speak", "speaks", "spoke", "spoken", "speaking", ["English", "to the class"]),
    "write": ("write", "writes", "wrote", "written", "writing", ["a letter", "a story"]),
    "drive": ("drive", "drives", "drove", "driven", "driving", ["the car", "to work"]),
    "begin": ("begin", "begins", "began", "begun", "beginning", ["the lesson", "the test"]),
    "choose": ("choose", "chooses", "chose", "chosen", "choosing", ["a colour", "a seat"]),
    "forget": ("forget", "forgets", "forgot", "forgotten", "forgetting", ["the keys", "the date"]),
    "swim": ("swim", "swims", "swam", "swum", "swimming", ["in the lake", "every day"]),
    "ride": ("ride", "rides", "rode", "ridden", "riding", ["a bike", "a horse"]),
    "freeze": ("freeze", "freezes", "froze", "frozen", "freezing", ["the water", "the fruit"]),
}
# The common verbs carry most of the corpus; the rare ones leave rare sub-word pieces.
COMMON = ["walk", "play", "cook", "clean", "study", "watch", "open", "help", "go", "eat", "see",
          "take", "give", "make", "read"]

SUBJECTS = [("I", "1s"), ("you", "2"), ("he", "3s"), ("she", "3s"), ("we", "1p"), ("they", "3p"),
            ("the teacher", "3s"), ("my friends", "3p"), ("the student", "3s"), ("our class", "3s")]
TIMES = {"present": ["every day", "on Mondays", "often"], "past": ["yesterday", "last week"],
         "future": ["tomorrow", "next week"], "perfect": ["already", "just"]}


def _be(person: str, tense: str) -> str:
    if tense == "present":
        return {"1s": "am", "3s": "is"}.get(person, "are")
    return "was" if person in ("1s", "3s") else "were"


def sentence(subject: str, person: str, verb: str, tense: str, obj: str, time: str) -> str:
    base, third, past, participle, ing, _ = VERBS[verb]
    if tense == "present simple":
        v = third if person == "3s" else base
        return f"{subject} {v} {obj} {time}."
    if tense == "past simple":
        return f"{subject} {past} {obj} {time}."
    if tense == "future":
        return f"{subject} will {base} {obj} {time}."
    if tense == "present perfect":
        have = "has" if person == "3s" else "have"
        return f"{subject} {have} {time} {participle} {obj}."
    if tense == "past perfect":
        return f"{subject} had {participle} {obj} before noon."
    if tense == "present continuous":
        return f"{subject} {_be(person, 'present')} {ing} {obj} now."
    if tense == "past continuous":
        return f"{subject} {_be(person, 'past')} {ing} {obj} when the bell rang."
    raise ValueError(tense)


TENSES = {"present simple": "present", "past simple": "past", "future": "future",
          "present perfect": "perfect", "past perfect": None, "present continuous": None,
          "past continuous": None}


def make_corpus(n: int = 600, seed: int = 0, rare_share: float = 0.06) -> list[str]:
    """`n` sentences; a `rare_share` of them use the rare irregular verbs."""
    rng = random.Random(seed)
    rare = [v for v in VERBS if v not in COMMON]
    out = []
    for _ in range(n):
        verb = rng.choice(rare) if rng.random() < rare_share else rng.choice(COMMON)
        subject, person = rng.choice(SUBJECTS)
        tense = rng.choice(list(TENSES))
        kind = TENSES[tense]
        time = rng.choice(TIMES[kind]) if kind else ""
        out.append(sentence(subject, person, verb, tense, rng.choice(VERBS[verb][5]), time))
    return out


def split(sentences: list[str], val_share: float = 0.1) -> tuple[list[str], list[str]]:
    cut = int(len(sentences) * (1 - val_share))
    return sentences[:cut], sentences[cut:]
