"""The generated world: workspaces, keys, brands, prompts and the raw answers behind every metric.

Static entities (workspaces, keys, brands, topics, prompts, competitors, pages, generations) are
small and built at start. Raw answers are not: they are generated lazily, one *block* per
(brand, day, engine), from a numpy generator seeded by those coordinates, and cached. A block holds
every answer to the brand's prompts that day on that engine: which brands each answer named and at
which position, with what sentiment, and which pages it cited. Everything the API serves (mention
rows, answer rows, citation and competitor metrics) is read from blocks, so metrics are derived from
the same raw data the row endpoints return.

Restatement: a block of a day inside the restated window (the last ``restate_days`` days) is also
seeded by the current revision, so its values change when the revision is bumped; which answers
exist does not change (answer ids stay stable), only what they contain.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import uuid
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from sandbox.config import SandboxConfig

ENGINES: tuple[str, ...] = (
    "chatgpt",
    "claude",
    "perplexity",
    "gemini",
    "google_ai_overviews",
    "google_ai_mode",
    "copilot",
)
ENGINE_INDEX = {name: i for i, name in enumerate(ENGINES)}

#: Most citations one answer can hold (columns of ``Block.cited_page``).
MAX_CITATIONS = 6
#: Probability that a brand's scheduled run is skipped on a given day (a "no-run" day).
NO_RUN_PROBABILITY = 0.08
#: Probability that an engine returned an answer to a prompt on a run day.
ANSWER_PROBABILITY = 0.95

#: RFC 4122 variant bits applied to one hex digit: ``(digit & 0b0011) | 0b1000``.
_UUID_VARIANT = {f"{d:x}": f"{(d & 0x3) | 0x8:x}" for d in range(16)}

_SECOND_LEVEL = frozenset({"co.uk", "com.au", "co.jp", "com.br", "co.nz"})

_PREFIXES = (
    "Acme",
    "Bright",
    "Nimbus",
    "Vertex",
    "Orbit",
    "Lumen",
    "Pioneer",
    "Harbor",
    "Summit",
    "Quanta",
    "Cedar",
    "Atlas",
    "Nova",
    "Echo",
    "Beacon",
    "Stride",
    "Falcon",
    "Maple",
    "Cobalt",
    "Juniper",
    "Zephyr",
    "Kite",
    "Granite",
    "Willow",
    "Ember",
    "Polar",
    "Sable",
    "Tandem",
    "Vivid",
    "Onyx",
)
_SUFFIXES = (
    "ly",
    "io",
    "Labs",
    "Works",
    "Hub",
    "Stack",
    "Flow",
    "Wise",
    "Base",
    "Point",
    "Forge",
    "Grid",
    "Nest",
    "Loop",
    "Path",
    "Desk",
    "Scope",
    "Line",
    "Sense",
    "Mark",
)
_CATEGORIES = (
    ("project management software", ("best project management tool", "kanban app", "team task tracker")),
    ("running shoes", ("best running shoes", "marathon trainers", "trail running shoes")),
    ("password manager", ("most secure password manager", "family password vault", "passkey support")),
    ("coffee subscription", ("best coffee subscription", "single origin beans", "espresso delivery")),
    ("CRM", ("best CRM for startups", "sales pipeline software", "CRM with email sync")),
    ("accounting software", ("small business accounting", "invoice software", "bookkeeping app")),
    ("note-taking app", ("best note taking app", "markdown notes", "notes with sync")),
)
_COUNTRIES = ("US", "GB", "DE", "FR", "US", "CA", "AU")
_TLD_BY_COUNTRY = {"US": "com", "GB": "co.uk", "DE": "de", "FR": "fr", "CA": "ca", "AU": "com.au"}
_THIRD_PARTY_HOSTS = (
    "en.wikipedia.org",
    "www.reddit.com",
    "old.reddit.com",
    "www.g2.com",
    "www.capterra.com",
    "www.forbes.com",
    "www.nytimes.com",
    "medium.com",
    "news.ycombinator.com",
    "www.youtube.com",
    "www.techradar.com",
    "www.bbc.co.uk",
    "www.theverge.com",
    "www.pcmag.com",
    "www.trustpilot.com",
)
_OWN_HOSTS = ("www", "blog", "docs", "help")
_PROMPT_TEMPLATES = (
    "What is the {q}?",
    "Which {q} do experts recommend?",
    "Compare options for {q}",
    "Is there a cheap {q}?",
    "{q} for beginners",
    "{q} reviews {year}",
    "Alternatives to the top {q}",
    "Which {q} is best in {country}?",
)
_TOPIC_NAMES = (
    "Pricing",
    "Comparisons",
    "Reviews",
    "Beginners",
    "Enterprise",
    "Alternatives",
    "Features",
    "Support",
    "Integrations",
    "Security",
)
_CONTENT_TYPES = ("blog_post", "listicle", "comparison", "guide")
_GENERATION_STATUSES = ("generating_brief", "writing_draft", "ready", "published")


def root_domain(host: str) -> str:
    """The registrable domain of a host: ``blog.acme.com`` -> ``acme.com``, ``www.x.co.uk`` -> ``x.co.uk``."""
    labels = host.lower().strip(".").split(".")
    if len(labels) >= 3 and ".".join(labels[-2:]) in _SECOND_LEVEL:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def zipf_pages(uniform: np.ndarray, n_pages: int, exponent: float = 0.9) -> np.ndarray:
    """Page indices with weights close to ``1 / (k + 1) ** exponent``, by inverting the continuous CDF.

    A closed form instead of a search over a cumulative table: a few vector operations per block.
    """
    a = 1.0 - exponent
    index = ((uniform * ((n_pages + 1.0) ** a - 1.0) + 1.0) ** (1.0 / a)).astype(np.int32) - 1
    return np.clip(index, 0, n_pages - 1)


def stable_int(*parts: object) -> int:
    """A 64-bit integer from the parts, identical across processes (unlike ``hash``)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


# ---------------------------------------------------------------------------------------------
# static entities


@dataclass(frozen=True)
class Workspace:
    id: str
    name: str
    subscription: str  # active | trialing | past_due
    plan: str
    api_access: bool


@dataclass(frozen=True)
class ApiKey:
    value: str
    role: str
    workspace_id: str
    brand_scope: frozenset[str] | None  # None: every brand of the workspace
    revoked: bool = False


@dataclass(frozen=True)
class CastMember:
    """A brand that answers can name: index 0 is the measured brand, the rest its competitors."""

    index: int
    name: str
    aliases: tuple[str, ...]
    domains: tuple[str, ...]  # root domains
    tracking: str  # "self" | "history" (tracked for ever) | "at_start" (tracked when the app starts) | "none"


@dataclass(frozen=True)
class Page:
    url: str
    domain: str
    root_domain: str
    owner: int  # cast index of the site's owner, -1 for third-party sites


@dataclass(frozen=True)
class Topic:
    id: str
    name: str
    created_at: dt.datetime


@dataclass(frozen=True)
class Prompt:
    index: int
    id: str
    text: str
    topic_id: str | None
    created_at: dt.datetime


@dataclass(frozen=True)
class Generation:
    id: str
    brand_id: str
    content_type: str
    status: str
    topic: str
    title: str
    slug: str
    meta_title: str
    meta_description: str
    brief_md: str
    draft_md: str
    source_recommendation_id: str
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True, eq=False)
class Brand:
    index: int
    id: str
    workspace_id: str
    name: str
    domain: str
    category: str
    aliases: tuple[str, ...]
    engines: tuple[str, ...]
    country: str
    created_at: dt.datetime
    topics: tuple[Topic, ...]
    prompts: tuple[Prompt, ...]
    cast: tuple[CastMember, ...]
    pages: tuple[Page, ...]
    page_owner: np.ndarray  # int16, owner cast index per page (-1: third party)
    mention_base: np.ndarray  # float (P, C): base probability that an answer names each cast member
    sentiment_mu: np.ndarray  # float (C,): mean sentiment (hundredths) per cast member
    engine_factor: np.ndarray  # float (7,)
    generations: tuple[Generation, ...]

    @cached_property
    def prompt_by_id(self) -> dict[str, Prompt]:
        return {p.id: p for p in self.prompts}

    @cached_property
    def cast_by_name(self) -> dict[str, CastMember]:
        return {c.name: c for c in self.cast}

    @cached_property
    def page_by_url(self) -> dict[str, int]:
        return {p.url: i for i, p in enumerate(self.pages)}

    @cached_property
    def page_root(self) -> np.ndarray:
        """Root domain of each page, as an object array for vectorized comparison."""
        return np.array([p.root_domain for p in self.pages], dtype=object)

    def api_row(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "domain": self.domain,
            "category": self.category,
            "aliases": list(self.aliases),
            "engines": list(self.engines),
            "country": self.country,
            "created_at": iso(self.created_at),
        }


@dataclass(frozen=True)
class Block:
    """Every answer of one brand on one day and engine (P = number of prompts, C = cast size)."""

    answered: np.ndarray  # bool (P,)
    position: np.ndarray  # int8 (P, C): 1-based position of each cast member, 0 when not named
    sentiment: np.ndarray  # int8 (P, C): sentiment in hundredths (-100..100), 0 when not named
    cited_page: np.ndarray  # int16 (P, MAX_CITATIONS): page index at citation position j+1, -1 none


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class World:
    """The deterministic content of a sandbox; immutable once built (mutable state lives elsewhere)."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.seed = config.seed
        self.today = config.today
        self.history_start = config.history_start
        self.namespace = uuid.uuid5(
            uuid.NAMESPACE_URL, f"https://sandbox.visibility.invalid/seed/{self.seed}"
        )
        self._namespace_sha1 = hashlib.sha1(self.namespace.bytes)  # noqa: S324 (uuid5 is SHA-1 by definition)
        self.workspaces: dict[str, Workspace] = {}
        self.keys: dict[str, ApiKey] = {}
        self.brands: list[Brand] = []
        self._build()
        self.brand_by_id = {b.id: b for b in self.brands}
        self.workspace_by_id = {w.id: w for w in self.workspaces.values()}
        self.prompt_owner: dict[str, Brand] = {p.id: b for b in self.brands for p in b.prompts}
        self.keys_by_role = {k.role: k.value for k in self.keys.values()}
        self.block = lru_cache(maxsize=16_384)(self._generate_block)
        self._ran: dict[tuple[int, int], bool] = {}  # (brand, day ordinal): at most brands x history days

    # -- ids -----------------------------------------------------------------------------------

    def uid(self, *parts: object) -> str:
        """``str(uuid5(namespace, "a:b:c"))``, without building a ``UUID`` (hot in row endpoints)."""
        return self.uid_of(":".join(map(str, parts)))

    def uid_of(self, name: str) -> str:
        """``str(uuid5(namespace, name))``; row builders pass the joined name to skip ``uid``'s join."""
        sha = self._namespace_sha1.copy()
        sha.update(name.encode())
        h = sha.hexdigest()
        return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_UUID_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"

    def answer_id(self, brand: Brand, prompt_index: int, day: dt.date, engine: str) -> str:
        return self.uid_of(f"answer:{brand.index}:{prompt_index}:{day.isoformat()}:{engine}")

    def mention_id(self, answer_id: str, cast_index: int) -> str:
        return self.uid_of(f"mention:{answer_id}:{cast_index}")

    def competitor_id(self, brand: Brand, member: CastMember) -> str:
        return self.uid("competitor", brand.id, member.name)

    # -- building ------------------------------------------------------------------------------

    def _build(self) -> None:
        rng = random.Random(stable_int(self.seed, "world"))
        names = [f"{p}{s}" if s.islower() else f"{p} {s}" for p in _PREFIXES for s in _SUFFIXES]
        rng.shuffle(names)
        self._names = iter(names)
        epoch = dt.datetime.combine(self.history_start, dt.time(9, 0), tzinfo=dt.UTC)
        large = self.config.size == "large"

        specs = [
            # key, name, subscription, plan, API access
            ("main", "Main workspace", "active", "growth", True),
            ("other", "Other workspace", "active", "growth", True),
            ("trial", "Trial workspace", "trialing", "growth", True),
            ("past_due", "Past-due workspace", "past_due", "growth", True),
            ("starter", "Starter workspace", "active", "starter", False),
        ]
        for key, name, subscription, plan, api in specs:
            ws = Workspace(self.uid("workspace", key), name, subscription, plan, api)
            self.workspaces[key] = ws

        main_count = 5 if large else 3
        engine_sets = [
            ENGINES,
            ("chatgpt", "perplexity", "gemini", "google_ai_overviews") if not large else ENGINES,
            ("chatgpt", "claude", "copilot") if not large else ENGINES[:6],
            ENGINES,
            ENGINES[1:],
        ]
        for i in range(main_count):
            self._add_brand(
                rng,
                self.workspaces["main"],
                engine_sets[i],
                _COUNTRIES[i],
                epoch,
                prompts=300 if large else 25,
                topics=10 if large else 4,
                pages=2400 if large else 80,
                competitors=8 if large else 6,
            )
        for ws_key, engines, country in (
            ("other", ("chatgpt", "gemini"), "FR"),
            ("trial", ("chatgpt", "claude", "perplexity"), "CA"),
            ("past_due", ("chatgpt",), "US"),
            ("starter", ("chatgpt",), "US"),
        ):
            self._add_brand(
                rng,
                self.workspaces[ws_key],
                engines,
                country,
                epoch,
                prompts=8,
                topics=2,
                pages=30,
                competitors=4,
            )

        main = self.workspaces["main"]
        main_brands = [b.id for b in self.brands if b.workspace_id == main.id]
        roles = [
            ("workspace", main.id, None, False),
            ("scoped", main.id, frozenset(main_brands[:2]), False),
            ("revoked", main.id, None, True),
            ("past_due", self.workspaces["past_due"].id, None, False),
            ("trialing", self.workspaces["trial"].id, None, False),
            ("no_api_plan", self.workspaces["starter"].id, None, False),
            ("other_workspace", self.workspaces["other"].id, None, False),
        ]
        for role, ws_id, scope, revoked in roles:
            value = "vsk_" + hashlib.blake2b(f"{self.seed}:key:{role}".encode(), digest_size=16).hexdigest()
            self.keys[value] = ApiKey(value, role, ws_id, scope, revoked)

    def _add_brand(
        self,
        rng: random.Random,
        workspace: Workspace,
        engines: tuple[str, ...],
        country: str,
        epoch: dt.datetime,
        *,
        prompts: int,
        topics: int,
        pages: int,
        competitors: int,
    ) -> None:
        index = len(self.brands)
        category, queries = _CATEGORIES[index % len(_CATEGORIES)]
        tld = _TLD_BY_COUNTRY[country]

        def domain_of(name: str) -> str:
            return "".join(ch for ch in name.lower() if ch.isalnum()) + "." + tld

        name = next(self._names)
        cast = [CastMember(0, name, (name.split()[0], f"{name} Inc"), (domain_of(name),), "self")]
        for c in range(1, competitors + 1):
            comp = next(self._names)
            tracking = "history" if c <= 2 else ("at_start" if c == 3 else "none")
            cast.append(CastMember(c, comp, (comp.split()[0],), (domain_of(comp),), tracking))
        brand_id = self.uid("brand", index)
        created = epoch - dt.timedelta(days=30 + index, hours=index)

        topic_list = tuple(
            Topic(
                self.uid("topic", index, t),
                _TOPIC_NAMES[t % len(_TOPIC_NAMES)],
                created + dt.timedelta(hours=t),
            )
            for t in range(topics)
        )
        prompt_list = []
        for p in range(prompts):
            template = _PROMPT_TEMPLATES[p % len(_PROMPT_TEMPLATES)]
            text = template.format(q=queries[p % len(queries)], year=2026, country=country)
            if p >= len(_PROMPT_TEMPLATES) * len(queries):
                text = f"{text} (variant {p})"
            topic_id = topic_list[rng.randrange(topics)].id if rng.random() < 0.8 else None
            prompt_list.append(
                Prompt(p, self.uid("prompt", index, p), text, topic_id, created + dt.timedelta(minutes=p))
            )

        page_list: list[Page] = []
        for n in range(pages):
            r = rng.random()
            if r < 0.18:
                owner, host = 0, f"{rng.choice(_OWN_HOSTS)}.{cast[0].domains[0]}"
            elif r < 0.45:
                owner = rng.randrange(1, len(cast))
                host = f"{rng.choice(_OWN_HOSTS)}.{cast[owner].domains[0]}"
            else:
                owner, host = -1, rng.choice(_THIRD_PARTY_HOSTS)
            slug = queries[n % len(queries)].replace(" ", "-")
            page_list.append(Page(f"https://{host}/{slug}-{n}", host, root_domain(host), owner))
        page_owner = np.array([p.owner for p in page_list], dtype=np.int16)

        nrng = np.random.default_rng(stable_int(self.seed, "brand", index))
        base = np.empty(len(cast))
        base[0] = nrng.uniform(0.35, 0.65)
        base[1:] = np.sort(nrng.uniform(0.05, 0.5, len(cast) - 1))[::-1]
        affinity = nrng.uniform(0.4, 1.5, (prompts, len(cast)))
        mention_base = np.clip(base[None, :] * affinity, 0.0, 0.95)
        sentiment_mu = nrng.uniform(-10, 60, len(cast))
        engine_factor = nrng.uniform(0.7, 1.25, len(ENGINES))

        generations = []
        for g in range(150):
            gen_created = created + dt.timedelta(days=30, hours=g * 13)
            topic = queries[g % len(queries)]
            title = f"{topic.capitalize()}: a guide by {name} #{g}"
            slug = f"{topic.replace(' ', '-')}-{g}"
            generations.append(
                Generation(
                    id=self.uid("generation", index, g),
                    brand_id=brand_id,
                    content_type=_CONTENT_TYPES[g % len(_CONTENT_TYPES)],
                    status=_GENERATION_STATUSES[(g * 7) % len(_GENERATION_STATUSES)],
                    topic=topic,
                    title=title,
                    slug=slug,
                    meta_title=title[:60],
                    meta_description=f"What to know about {topic}, from {name}.",
                    brief_md=f"# Brief\n\n- Audience: buyers of {category}\n- Angle: {topic}\n",
                    draft_md=f"# {title}\n\nWhen people ask about {topic}, {name} comes up.\n",
                    source_recommendation_id=self.uid("recommendation", index, g),
                    created_at=gen_created,
                    updated_at=gen_created + dt.timedelta(hours=2),
                )
            )
        generations.sort(key=lambda g: g.created_at, reverse=True)

        self.brands.append(
            Brand(
                index=index,
                id=brand_id,
                workspace_id=workspace.id,
                name=name,
                domain=cast[0].domains[0],
                category=category,
                aliases=cast[0].aliases,
                engines=engines,
                country=country,
                created_at=created,
                topics=topic_list,
                prompts=tuple(prompt_list),
                cast=tuple(cast),
                pages=tuple(page_list),
                page_owner=page_owner,
                mention_base=mention_base,
                sentiment_mu=sentiment_mu,
                engine_factor=engine_factor,
                generations=tuple(generations),
            )
        )

    # -- raw data --------------------------------------------------------------------------------

    def has_data(self, day: dt.date) -> bool:
        return self.history_start <= day < self.today

    def ran(self, brand: Brand, day: dt.date) -> bool:
        """Whether the brand's scheduled run happened that day (some days have no run at all)."""
        if not self.has_data(day) or not brand.prompts:
            return False
        key = (brand.index, day.toordinal())
        ran = self._ran.get(key)
        if ran is None:
            draw = stable_int(self.seed, "run", brand.index, day.isoformat()) % 10_000
            ran = self._ran[key] = draw >= NO_RUN_PROBABILITY * 10_000
        return ran

    def effective_revision(self, day: dt.date, revision: int) -> int:
        """The revision that seeds a day: only the last ``restate_days`` days are restated."""
        if revision and day >= self.today - dt.timedelta(days=self.config.restate_days):
            return revision
        return 0

    def get_block(self, brand: Brand, day: dt.date, engine: str, revision: int) -> Block | None:
        """The answers of a brand on one day and engine; ``None`` when it did not run there."""
        if engine not in brand.engines or not self.ran(brand, day):
            return None
        return self.block(
            brand.index, day.toordinal(), ENGINE_INDEX[engine], self.effective_revision(day, revision)
        )

    def day_blocks(
        self, brand: Brand, day: dt.date, engines: list[str], revision: int
    ) -> list[tuple[str, Block]]:
        """The blocks of one day on ``engines`` (engines the brand is measured on): one run check for all."""
        if not engines or not self.ran(brand, day):
            return []
        ordinal, effective = day.toordinal(), self.effective_revision(day, revision)
        return [
            (engine, self.block(brand.index, ordinal, ENGINE_INDEX[engine], effective)) for engine in engines
        ]

    def _generate_block(self, brand_index: int, day_ordinal: int, engine_index: int, revision: int) -> Block:
        brand = self.brands[brand_index]
        n_prompts, n_cast = brand.mention_base.shape
        base = np.random.default_rng((self.seed, brand_index, day_ordinal, engine_index))
        answered = base.random(n_prompts) < ANSWER_PROBABILITY

        rng = np.random.default_rng((self.seed, brand_index, day_ordinal, engine_index, revision, 1))
        phase = np.arange(n_cast) * 1.7 + brand_index
        drift = 1.0 + 0.2 * np.sin(day_ordinal / 11.0 + phase)
        prob = np.clip(brand.mention_base * drift[None, :] * brand.engine_factor[engine_index], 0.0, 0.95)
        named = (rng.random((n_prompts, n_cast)) < prob) & answered[:, None]
        keys = np.where(named, rng.random((n_prompts, n_cast)), 2.0)
        order = np.argsort(keys, axis=1)
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(1, n_cast + 1)[None, :].repeat(n_prompts, 0), axis=1)
        position = np.where(named, ranks, 0).astype(np.int8)
        noise = rng.standard_normal((n_prompts, n_cast), dtype=np.float32)
        raw_sentiment = np.rint(noise * 35.0 + brand.sentiment_mu[None, :])
        sentiment = np.where(named, np.clip(raw_sentiment, -100, 100), 0).astype(np.int8)

        n_cited = rng.integers(0, MAX_CITATIONS + 1, n_prompts) * answered
        pages = zipf_pages(rng.random((n_prompts, MAX_CITATIONS), dtype=np.float32), len(brand.pages))
        cited = np.where(np.arange(MAX_CITATIONS)[None, :] < n_cited[:, None], pages, -1).astype(np.int16)
        for array in (answered, position, sentiment, cited):
            array.setflags(write=False)
        return Block(answered, position, sentiment, cited)

    def days(self, start: dt.date, end: dt.date) -> list[dt.date]:
        """Days of ``[start, end)`` that can hold data."""
        first = max(start, self.history_start)
        last = min(end, self.today)
        return [first + dt.timedelta(days=i) for i in range((last - first).days)]
