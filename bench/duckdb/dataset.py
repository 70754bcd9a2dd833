"""The benchmark's one dataset: people who know each other, loaded in many transactions, then
a run of transactions that change ages, so that as-of and since have history to read.

Everything comes from one seeded `random.Random`, so a size always gives the same datoms. The
dataset is kept as logical transactions (`Tx`); each engine renders them its own way: Vev as
transaction EDN, the SQL peers as datom rows (`peer_rows`) with their own entity and
transaction ids. Answers are compared by value (emails, names, ages), never by entity id.
"""

import random
from dataclasses import dataclass, field

FIRST_NAMES = [
    "Ada", "Alan", "Anna", "Ben", "Carl", "Clara", "Dan", "Dora", "Emil", "Eva",
    "Finn", "Frida", "Gus", "Greta", "Hans", "Ida", "Ivan", "Jon", "Karin", "Lars",
    "Lea", "Mats", "Mia", "Nils", "Nora", "Olaf", "Olga", "Per", "Rut", "Sven",
    "Tove", "Ulf", "Vera", "Wim", "Yara", "Zoe", "Bo", "Liv", "Max", "Siv",
]
LAST_NAMES = [
    "Berg", "Dahl", "Ek", "Falk", "Holm", "Lind", "Lund", "Nord", "Ros", "Sand",
    "Strand", "Vik", "Wall", "Alm", "Borg", "Fors", "Hed", "Kvist", "Moberg", "Ny",
    "Sjo", "Stal", "Torn", "Ulv", "Aas",
]
AGE_MIN, AGE_MAX = 18, 89
FRIENDS_PER_PERSON = 3
# Datoms per person: email, name, age and the friends.
DATOMS_PER_PERSON = 3 + FRIENDS_PER_PERSON
# One person in UPDATE_EVERY gets a new age, spread over UPDATE_TXS transactions.
UPDATE_EVERY = 20
UPDATE_TXS = 10

# The attributes, as the SQL peers number them (their schema table holds the same).
TX_INSTANT, EMAIL, NAME, AGE, FRIENDS = 1, 10, 11, 12, 13
ATTRIBUTES = [
    (TX_INSTANT, ":db/txInstant", "instant", "one", None),
    (EMAIL, ":person/email", "string", "one", "identity"),
    (NAME, ":person/name", "string", "one", None),
    (AGE, ":person/age", "long", "one", None),
    (FRIENDS, ":person/friends", "ref", "many", None),
]
VEV_SCHEMA = """[{:db/ident :person/email :db/valueType :db.type/string
  :db/cardinality :db.cardinality/one :db/unique :db.unique/identity}
 {:db/ident :person/name :db/valueType :db.type/string
  :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :person/age :db/valueType :db.type/long
  :db/cardinality :db.cardinality/one :db/index true}
 {:db/ident :person/friends :db/valueType :db.type/ref
  :db/cardinality :db.cardinality/many}]"""

# The SQL peers' ids: person i is entity PERSON_E0 + i; transaction k (1-based, in dataset
# order) is TX0 + k, which is also its transaction entity (as in Datomic).
PERSON_E0 = 1
TX0 = 1_000_000_000
# The peers' fake wall clock: transaction k happened at INSTANT0_MS + k seconds.
INSTANT0_MS = 1_767_225_600_000


@dataclass
class Person:
    email: str
    name: str
    age: int
    friends: list = field(default_factory=list)


@dataclass
class Tx:
    """A logical transaction: new people `first..first+count`, or age changes."""

    first: int = 0
    count: int = 0
    # (person, old age, new age)
    updates: list = field(default_factory=list)


class Dataset:
    def __init__(self, target_datoms, seed, people_per_tx):
        rng = random.Random(seed)
        # Each person brings DATOMS_PER_PERSON datoms, and 2 per age change.
        n = max(100, round(target_datoms / (DATOMS_PER_PERSON + 2 / UPDATE_EVERY)))
        self.people = [self._person(rng, i) for i in range(n)]
        self.txs = [
            Tx(first=i, count=min(people_per_tx, n - i)) for i in range(0, n, people_per_tx)
        ]
        self.load_txs = len(self.txs)
        ages = [p.age for p in self.people]
        per_tx = max(1, n // UPDATE_EVERY // UPDATE_TXS)
        for _ in range(UPDATE_TXS):
            tx = Tx()
            for i in rng.sample(range(n), per_tx):
                new = rng.randint(AGE_MIN, AGE_MAX - 1)
                new += new >= ages[i]  # never the current age: Datomic drops such a datom
                tx.updates.append((i, ages[i], new))
                ages[i] = new
            self.txs.append(tx)

    @staticmethod
    def _person(rng, i):
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        return Person(
            email=f"{first.lower()}.{last.lower()}.{i}@example.org",
            name=f"{first} {last}",
            age=rng.randint(AGE_MIN, AGE_MAX),
            friends=rng.sample(range(i), min(FRIENDS_PER_PERSON, i)),
        )

    def datoms(self):
        """Datoms in the log, as the peers store them (transaction instants included)."""
        people = sum(3 + len(p.friends) for p in self.people)
        updates = sum(2 * len(tx.updates) for tx in self.txs)
        return people + updates + len(self.txs)

    # Vev's transactions ----------------------------------------------------------------

    def vev_tx(self, tx):
        """Transaction EDN: new people as maps (tempids inside the transaction, lookup refs to
        earlier ones), age changes as `:db/add` through the email (the old age is retracted by
        Vev, as the attribute is cardinality-one)."""
        if tx.updates:
            return "[" + " ".join(
                f'[:db/add [:person/email "{self.people[i].email}"] :person/age {new}]'
                for i, _, new in tx.updates
            ) + "]"
        maps = []
        for i in range(tx.first, tx.first + tx.count):
            p = self.people[i]
            refs = " ".join(
                f'"p{j}"' if j >= tx.first else f'[:person/email "{self.people[j].email}"]'
                for j in p.friends
            )
            friends = f" :person/friends [{refs}]" if refs else ""
            maps.append(
                f'{{:db/id "p{i}" :person/email "{p.email}" :person/name "{p.name}"'
                f" :person/age {p.age}{friends}}}"
            )
        return "[" + "\n ".join(maps) + "]"

    # The SQL peers' rows ---------------------------------------------------------------

    def peer_rows(self):
        """Every datom of the log as (e, a, v, tx, added), in transaction order."""
        rows = []
        for k, tx in enumerate(self.txs, start=1):
            t = TX0 + k
            rows.append((t, TX_INSTANT, INSTANT0_MS + 1000 * k, t, True))
            for i in range(tx.first, tx.first + tx.count):
                p, e = self.people[i], PERSON_E0 + i
                rows.append((e, EMAIL, p.email, t, True))
                rows.append((e, NAME, p.name, t, True))
                rows.append((e, AGE, p.age, t, True))
                rows.extend((e, FRIENDS, PERSON_E0 + j, t, True) for j in p.friends)
            for i, old, new in tx.updates:
                rows.append((PERSON_E0 + i, AGE, old, t, False))
                rows.append((PERSON_E0 + i, AGE, new, t, True))
        return rows

    def peer_tx(self, k):
        """The peers' transaction id of the dataset's k-th transaction (1-based)."""
        return TX0 + k
