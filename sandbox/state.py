"""What changes while a sandbox runs: tracking, topics, audits, created brands and the revision.

The generated world never changes; everything a client can change lives here, behind one lock
(handlers run in a thread pool). Time-based transitions (backfill done, audit complete) are not
scheduled: they are read off a monotonic clock when asked, against the delays of the *current*
config, so changing a delay at runtime takes effect at once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sandbox.config import SandboxConfig
from sandbox.errors import ApiError, not_found
from sandbox.world import Brand, CastMember, World


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


@dataclass
class Tracking:
    """A tracked competitor of a brand; ``started`` is ``None`` when its history was always complete."""

    competitor_id: str
    member: CastMember
    tracked_since: dt.datetime
    started: float | None


@dataclass
class TopicRecord:
    id: str
    name: str
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass
class AuditRecord:
    id: str
    workspace_id: str
    brand_id: str
    url: str
    created_at: dt.datetime
    started: float


class SandboxState:
    """Mutable state of one sandbox instance."""

    def __init__(
        self,
        world: World,
        config: SandboxConfig,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = _utc_now,
    ) -> None:
        self.world = world
        self.config = config
        self.clock = clock
        self.now = now
        self.lock = threading.RLock()
        self.revision = 0
        self.created_brands: dict[str, Brand] = {}
        self.audits: dict[str, AuditRecord] = {}
        self.tracked: dict[str, dict[int, Tracking]] = {}
        self.topics: dict[str, dict[str, TopicRecord]] = {}
        start, started_at = clock(), now()
        for brand in world.brands:
            tracked: dict[int, Tracking] = {}
            for member in brand.cast:
                if member.tracking == "history":
                    since = brand.created_at + dt.timedelta(days=1, hours=member.index)
                    tracked[member.index] = Tracking(world.competitor_id(brand, member), member, since, None)
                elif member.tracking == "at_start":
                    tracked[member.index] = Tracking(
                        world.competitor_id(brand, member), member, started_at, start
                    )
            self.tracked[brand.id] = tracked
            self.topics[brand.id] = {
                t.id: TopicRecord(t.id, t.name, t.created_at, t.created_at) for t in brand.topics
            }

    # -- brands ----------------------------------------------------------------------------------

    def brand(self, brand_id: str) -> Brand | None:
        return self.world.brand_by_id.get(brand_id) or self.created_brands.get(brand_id)

    def workspace_brands(self, workspace_id: str) -> list[Brand]:
        with self.lock:
            created = [b for b in self.created_brands.values() if b.workspace_id == workspace_id]
        return [b for b in self.world.brands if b.workspace_id == workspace_id] + created

    def create_brand(self, workspace_id: str, fields: dict[str, object]) -> Brand:
        """A brand without prompts yet: it is listed and readable, and has no data."""
        with self.lock:
            template = self.world.brands[0]
            index = len(self.world.brands) + len(self.created_brands)
            brand_id = self.world.uid("created-brand", workspace_id, index)
            name = str(fields["name"])
            member = CastMember(0, name, tuple(fields.get("aliases", ())), (str(fields["domain"]),), "self")  # type: ignore[arg-type]
            brand = dataclasses.replace(
                template,
                index=index,
                id=brand_id,
                workspace_id=workspace_id,
                name=name,
                domain=str(fields["domain"]),
                category=str(fields.get("category", "uncategorized")),
                aliases=member.aliases,
                engines=tuple(fields.get("engines", ("chatgpt",))),  # type: ignore[arg-type]
                country=str(fields.get("country", "US")),
                created_at=self.now(),
                topics=(),
                prompts=(),
                cast=(member,),
                pages=(),
                page_owner=np.zeros(0, dtype=np.int16),
                mention_base=np.zeros((0, 1)),
                sentiment_mu=np.zeros(1),
                generations=(),
            )
            self.created_brands[brand_id] = brand
            self.tracked[brand_id] = {}
            self.topics[brand_id] = {}
            return brand

    # -- revision --------------------------------------------------------------------------------

    def restate(self) -> int:
        """Bump the revision: values of the last ``restate_days`` days change, deterministically."""
        with self.lock:
            self.revision += 1
            return self.revision

    # -- competitors -------------------------------------------------------------------------------

    def backfilled(self, tracking: Tracking) -> bool:
        return (
            tracking.started is None or self.clock() - tracking.started >= self.config.backfill_delay_seconds
        )

    def history_from(self, tracking: Tracking) -> dt.date | None:
        """The first day of complete history, or ``None`` while the backfill after tracking runs."""
        return self.world.history_start if self.backfilled(tracking) else None

    def tracked_list(self, brand: Brand) -> list[Tracking]:
        with self.lock:
            items = list(self.tracked.get(brand.id, {}).values())
        return sorted(items, key=lambda t: (t.tracked_since, t.member.name))

    def untrack(self, brand: Brand, competitor_id: str) -> Tracking:
        with self.lock:
            tracked = self.tracked.get(brand.id, {})
            for index, tracking in tracked.items():
                if tracking.competitor_id == competitor_id:
                    del tracked[index]
                    return tracking
        raise not_found("Tracked competitor")

    def track(self, brand: Brand, brand_name: str) -> Tracking:
        """Track a discovered competitor (again); its history is backfilled after the delay."""
        member = brand.cast_by_name.get(brand_name)
        if member is None or member.index == 0:
            raise not_found("Discovered competitor")
        with self.lock:
            tracked = self.tracked.setdefault(brand.id, {})
            if member.index in tracked:
                raise ApiError("invalid_request", f"'{brand_name}' is already tracked.")
            tracking = Tracking(self.world.competitor_id(brand, member), member, self.now(), self.clock())
            tracked[member.index] = tracking
            return tracking

    # -- topics ------------------------------------------------------------------------------------

    def topic_list(self, brand: Brand) -> list[TopicRecord]:
        with self.lock:
            return sorted(self.topics.get(brand.id, {}).values(), key=lambda t: (t.created_at, t.id))

    def create_topic(self, brand: Brand, name: str) -> TopicRecord:
        with self.lock:
            topics = self.topics.setdefault(brand.id, {})
            topic_id = self.world.uid("created-topic", brand.id, len(topics))
            moment = self.now()
            record = TopicRecord(topic_id, name, moment, moment)
            topics[topic_id] = record
            return record

    def rename_topic(self, brand: Brand, topic_id: str, name: str) -> TopicRecord:
        with self.lock:
            record = self.topics.get(brand.id, {}).get(topic_id)
            if record is None:
                raise not_found("Topic")
            record.name = name
            record.updated_at = max(self.now(), record.created_at)
            return record

    # -- audits ------------------------------------------------------------------------------------

    def create_audit(self, workspace_id: str, brand: Brand, url: str) -> AuditRecord:
        with self.lock:
            audit_id = self.world.uid("audit", len(self.audits))
            record = AuditRecord(audit_id, workspace_id, brand.id, url, self.now(), self.clock())
            self.audits[audit_id] = record
            return record

    def audit(self, audit_id: str) -> AuditRecord | None:
        with self.lock:
            return self.audits.get(audit_id)

    def audit_complete(self, record: AuditRecord) -> bool:
        return self.clock() - record.started >= self.config.audit_delay_seconds
