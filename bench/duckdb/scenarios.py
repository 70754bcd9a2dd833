"""The query scenarios: for each, the Datalog Vev runs, the SQL the peers run, the values of
each call (a few probe people, taken in turn, the same sequence for every engine), and how an
engine's rows become a canonical answer so that the three can be compared.

Canonical answers are sorted lists of tuples of plain values; entity ids become emails (each
engine has its own ids) and averages are rounded to 9 decimals.
"""

import json
import random
from dataclasses import dataclass

from dataset import PERSON_E0

PROBES = 16
# predicate_scan keeps the people older than this (about 1 in 8); as_of those older than
# AS_OF_AGE at an earlier t (about 1 in 18).
OLDER_THAN = 80
AS_OF_AGE = 85
# input_bindings: people of a given name at least this old.
MIN_AGE = 60

POINT = (
    '[:find ?name ?age :where [?e :person/email "{email}"] [?e :person/name ?name]'
    " [?e :person/age ?age]]"
)
REF = (
    '[:find ?name :where [?p :person/email "{email}"] [?p :person/friends ?f]'
    " [?f :person/friends ?ff] [?ff :person/name ?name]]"
)
AGGREGATE = "[:find (count ?e) (avg ?age) :where [?e :person/age ?age]]"
OLDER = (
    "[:find ?email ?age :where [?e :person/age ?age] [(> ?age {age})]"
    " [?e :person/email ?email]]"
)
PULL = "[:person/name {:person/friends [:person/name]}]"
SINCE = "[:find ?e ?age :where [?e :person/age ?age]]"
INPUTS = (
    "[:find ?email ?age :in $ ?name ?min :where [?e :person/name ?name] [?e :person/age ?age]"
    " [(>= ?age ?min)] [?e :person/email ?email]]"
)


@dataclass
class Scenario:
    name: str
    # What the report shows: the Datalog, and how Vev is called.
    shown: str
    # One (sql, params) per probe, per engine.
    vev_calls: list
    peer_sql: object  # Sql -> str
    peer_params: list
    # rows -> canonical answer, for Vev and for the peers.
    vev_answer: object
    peer_answer: object


def rows(r):
    return sorted(tuple(x) for x in r)


def pull_answer(name, friend_names):
    return [(name, tuple(sorted(n for n in friend_names if n is not None)))]


def vev_pull_answer(r):
    """`vev_pull`'s (e, pull JSON) rows as (name, sorted friends' names); the JSON keys are
    the attributes without their colon."""
    answers = []
    for _, doc in r:
        tree = json.loads(doc)
        friends = [f["person/name"] for f in tree.get("person/friends", [])]
        answers += pull_answer(tree["person/name"], friends)
    return sorted(answers)


def peer_pull_answer(r):
    """The peers' (name, friend's name) rows, one per friend (one row with no friend's name
    when there is none), as (name, sorted friends' names)."""
    return pull_answer(r[0][0], [f for _, f in r]) if r else []


def aggregate_answer(r):
    return [(count, round(avg, 9)) for count, avg in r]


def build(dataset, seed, path, vev_emails, vev_t, peer_t):
    """The scenarios over `dataset`. `vev_emails`: Vev's entity id -> email; `vev_t`/`peer_t`:
    {"as_of": t, "since": t} in each side's transaction ids."""
    n = len(dataset.people)
    probes = [dataset.people[i] for i in random.Random(seed ^ 0x5EED).sample(range(n // 2, n), PROBES)]
    emails = [p.email for p in probes]
    by_email = [{"email": e} for e in emails]

    def vev_text(template, **values):
        return [("SELECT * FROM vev_query(?, ?)", [path, template.format(**values)])]

    def peer_since_answer(r):
        return rows((dataset.people[e - PERSON_E0].email, age) for e, age in r)

    def vev_since_answer(r):
        return rows((vev_emails[e], age) for e, age in r)

    return [
        Scenario(
            "point_lookup", POINT,
            [c for e in emails for c in vev_text(POINT, email=e)],
            lambda s: s.point_lookup(), by_email, rows, rows,
        ),
        Scenario(
            "ref_traversal", REF,
            [c for e in emails for c in vev_text(REF, email=e)],
            lambda s: s.ref_traversal(), by_email, rows, rows,
        ),
        Scenario(
            "aggregate", AGGREGATE, vev_text(AGGREGATE),
            lambda s: s.aggregate(), [{}], aggregate_answer, aggregate_answer,
        ),
        Scenario(
            "predicate_scan", OLDER.format(age=OLDER_THAN), vev_text(OLDER, age=OLDER_THAN),
            lambda s: s.older_than(OLDER_THAN), [{}], rows, rows,
        ),
        Scenario(
            "pull", f"vev_pull(path, '{PULL}', '[:person/email \"…\"]')",
            [("SELECT * FROM vev_pull(?, ?, ?)", [path, PULL, f'[:person/email "{e}"]'])
             for e in emails],
            lambda s: s.pull(), by_email, vev_pull_answer, peer_pull_answer,
        ),
        Scenario(
            "as_of", OLDER.format(age=AS_OF_AGE) + ", as_of := t",
            [("SELECT * FROM vev_query(?, ?, as_of := ?)",
              [path, OLDER.format(age=AS_OF_AGE), vev_t["as_of"]])],
            lambda s: s.older_than(AS_OF_AGE, "as_of"), [{"t": peer_t["as_of"]}], rows, rows,
        ),
        Scenario(
            "since", SINCE + ", since := t",
            [("SELECT * FROM vev_query(?, ?, since := ?)", [path, SINCE, vev_t["since"]])],
            lambda s: s.since(), [{"t": peer_t["since"]}], vev_since_answer, peer_since_answer,
        ),
        Scenario(
            "input_bindings", INPUTS + ", in1 := name, in2 := min",
            [("SELECT * FROM vev_query(?, ?, in1 := ?, in2 := ?)", [path, INPUTS, p.name, MIN_AGE])
             for p in probes],
            lambda s: s.input_bindings(), [{"name": p.name, "min": MIN_AGE} for p in probes],
            rows, rows,
        ),
    ]
