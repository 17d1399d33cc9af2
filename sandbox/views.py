"""Response payloads read from the world and the state: rows, trends and rankings.

No HTTP here: handlers in ``app.py`` validate the request and call these; everything returned is
JSON-ready. Daily counts per (brand, day, engine, revision) are cached, so trends over 30 days of a
brand with 300 prompts on 7 engines read 210 small matrices.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from sandbox import metrics
from sandbox.params import Window
from sandbox.state import SandboxState, TopicRecord, Tracking
from sandbox.world import ENGINES, MAX_CITATIONS, Block, Brand, Generation, World, iso, root_domain

Row = dict[str, Any]
_CITATION_POSITIONS = np.arange(1, MAX_CITATIONS + 1)


@dataclass(frozen=True)
class RowPage:
    """A slice of a longer list, for cursor paging."""

    rows: list[Row]
    has_more: bool
    next_offset: int | None


class Views:
    """Payload builders over one world and its state."""

    def __init__(self, world: World, state: SandboxState) -> None:
        self.world = world
        self.state = state
        self._counts = lru_cache(maxsize=32_768)(self._block_counts)

    # -- helpers -----------------------------------------------------------------------------------

    def _engines(self, brand: Brand, engine: str | None) -> list[str]:
        if engine is None:
            return [e for e in ENGINES if e in brand.engines]
        return [engine] if engine in brand.engines else []

    def _blocks(self, brand: Brand, day: dt.date, engines: list[str]) -> list[tuple[str, Block]]:
        """The day's blocks on ``engines`` (a subset of the brand's, as ``_engines`` gives)."""
        return self.world.day_blocks(brand, day, engines, self.state.revision)

    def _block_counts(self, brand_index: int, day: dt.date, engine: str, revision: int) -> np.ndarray:
        brand = self.world.brands[brand_index]
        block = self.world.get_block(brand, day, engine, revision)
        assert block is not None
        counts = metrics.block_counts(block, brand.page_owner)
        counts.setflags(write=False)
        return counts

    def daily_counts(self, brand: Brand, day: dt.date, engines: list[str]) -> np.ndarray | None:
        """Counts of every cast member on one day, summed over engines; ``None`` without a run."""
        total: np.ndarray | None = None
        revision = self.state.revision
        for engine in engines:
            if self.world.get_block(brand, day, engine, revision) is None:
                continue
            effective = self.world.effective_revision(day, revision)
            counts = self._counts(brand.index, day, engine, effective)
            total = counts.copy() if total is None else total + counts
        return total

    # -- simple records ----------------------------------------------------------------------------

    @staticmethod
    def page(rows: list[Row], offset: int, limit: int) -> RowPage:
        chunk = rows[offset : offset + limit]
        more = offset + limit < len(rows)
        return RowPage(chunk, more, offset + limit if more else None)

    def topic_row(self, brand: Brand, record: TopicRecord) -> Row:
        count = sum(1 for p in brand.prompts if p.topic_id == record.id)
        return {
            "id": record.id,
            "name": record.name,
            "prompt_count": count,
            "created_at": iso(record.created_at),
            "updated_at": iso(record.updated_at),
        }

    @staticmethod
    def prompt_rows(brand: Brand) -> list[Row]:
        return [
            {"id": p.id, "text": p.text, "topic_id": p.topic_id, "created_at": iso(p.created_at)}
            for p in brand.prompts
        ]

    @staticmethod
    def generation_row(generation: Generation, full: bool) -> Row:
        row: Row = {
            "id": generation.id,
            "brand_id": generation.brand_id,
            "content_type": generation.content_type,
            "status": generation.status,
            "topic": generation.topic,
            "title": generation.title,
            "source_recommendation_id": generation.source_recommendation_id,
            "created_at": iso(generation.created_at),
            "updated_at": iso(generation.updated_at),
        }
        if full:
            row.update(
                slug=generation.slug,
                meta_title=generation.meta_title,
                meta_description=generation.meta_description,
                brief_md=generation.brief_md,
                draft_md=generation.draft_md,
            )
        return row

    def tracked_row(self, tracking: Tracking) -> Row:
        history_from = self.state.history_from(tracking)
        return {
            "id": tracking.competitor_id,
            "brand_name": tracking.member.name,
            "aliases": list(tracking.member.aliases),
            "domains": list(tracking.member.domains),
            "history_from": history_from.isoformat() if history_from else None,
            "tracked_since": iso(tracking.tracked_since),
        }

    # -- raw rows ------------------------------------------------------------------------------------

    def mentions(
        self, brand: Brand, prompt_index: int, window: Window, engine: str | None, offset: int, limit: int
    ) -> RowPage:
        """Every brand named in the prompt's answers: by day, engine order, then position.

        Stops one row past the page: ``has_more`` needs no more, and later days are not generated.
        Mentions stay arrays until the page is cut; only the page's rows become dicts.
        """
        answers, position, sentiment = self._prompt_answers(
            brand, prompt_index, window, engine, offset + limit + 1
        )
        # every mention: (answer, cast) in answer order, then by position (then cast, a tie-break that
        # positions never need)
        on_answer, cast = np.nonzero(position)
        places = position[on_answer, cast]
        order = np.lexsort((cast, places, on_answer))[offset : offset + limit]
        prompt_id = brand.prompts[prompt_index].id
        names = [member.name for member in brand.cast]
        rows: list[Row] = []
        current = -1  # the answer of the rows being built: an answer's rows are adjacent
        for answer, cast_index, place, feeling in zip(
            on_answer[order].tolist(),
            cast[order].tolist(),
            places[order].tolist(),
            (sentiment[on_answer[order], cast[order]] / 100.0).tolist(),
            strict=True,
        ):
            if answer != current:
                current = answer
                day, eng = answers[answer]
                checked_on = day.isoformat()
                answer_id = self.world.answer_id(brand, prompt_index, day, eng)
            rows.append(
                {
                    "id": self.world.mention_id(answer_id, cast_index),
                    "response_id": answer_id,
                    "brand_name": names[cast_index],
                    "position": place,
                    "sentiment": feeling,
                    "prompt_id": prompt_id,
                    "engine": eng,
                    "checked_on": checked_on,
                }
            )
        more = offset + limit < on_answer.size
        return RowPage(rows, more, offset + limit if more else None)

    def _prompt_answers(
        self, brand: Brand, prompt_index: int, window: Window, engine: str | None, wanted: int
    ) -> tuple[list[tuple[dt.date, str]], np.ndarray, np.ndarray]:
        """The prompt's answers by day and engine order, until they hold ``wanted`` mentions: their
        (day, engine), and the position and sentiment matrices (answer x cast) of what they named."""
        answers: list[tuple[dt.date, str]] = []
        positions: list[np.ndarray] = []
        sentiments: list[np.ndarray] = []
        found = 0
        engines = self._engines(brand, engine)
        for day in self.world.days(window.start, window.end):
            if found >= wanted:
                break
            blocks = self._blocks(brand, day, engines)
            if not blocks:
                continue
            rows = [block.position[prompt_index] for _, block in blocks]
            found += int(np.count_nonzero(rows))
            positions.extend(rows)
            sentiments.extend(block.sentiment[prompt_index] for _, block in blocks)
            answers.extend((day, eng) for eng, _ in blocks)
        n_cast = len(brand.cast)
        if not answers:
            return answers, np.zeros((0, n_cast), dtype=np.int8), np.zeros((0, n_cast), dtype=np.int8)
        return answers, np.array(positions), np.array(sentiments)

    def answers(self, brand: Brand, window: Window, engine: str | None, offset: int, limit: int) -> RowPage:
        """Answered responses, by day, engine order, then prompt; only the page's rows are built."""
        rows: list[Row] = []
        first = 0  # index, in the whole list, of the first row of the current block
        engines = self._engines(brand, engine)
        for day in self.world.days(window.start, window.end):
            for eng, block in self._blocks(brand, day, engines):
                count = int(np.count_nonzero(block.answered))
                if count == 0 or first + count <= offset:
                    first += count  # a block before the page: counted, not listed
                    continue
                wanted = np.flatnonzero(block.answered)[max(0, offset - first) :]
                room = limit - len(rows)
                rows.extend(self._answer_rows(brand, block, wanted[:room], day, eng))
                if wanted.size > room:
                    return RowPage(rows, True, offset + limit)
                first += count
        return RowPage(rows, False, None)

    def _answer_rows(
        self, brand: Brand, block: Block, prompt_indices: np.ndarray, day: dt.date, engine: str
    ) -> list[Row]:
        """Rows of some answers of one block; counts are taken for all of them at once."""
        positions = block.position[prompt_indices]
        own = positions[:, 0].tolist()
        mention_counts = np.count_nonzero(positions, axis=1).tolist()
        citation_counts = np.count_nonzero(block.cited_page[prompt_indices] >= 0, axis=1).tolist()
        checked_on = day.isoformat()
        return [
            {
                "id": self.world.answer_id(brand, prompt_index, day, engine),
                "prompt_id": brand.prompts[prompt_index].id,
                "engine": engine,
                "checked_on": checked_on,
                "brand_mentioned": position > 0,
                "brand_position": position or None,
                "mention_count": mentions,
                "citation_count": citations,
            }
            for prompt_index, position, mentions, citations in zip(
                prompt_indices.tolist(), own, mention_counts, citation_counts, strict=True
            )
        ]

    # -- competitor trends --------------------------------------------------------------------------

    def competitor_trends(self, brand: Brand, window: Window, engine: str | None, granularity: str) -> Row:
        """The brand and each tracked competitor; days without a run have no point."""
        tracked = self.state.tracked_list(brand)
        rows = [0, *(t.member.index for t in tracked)]
        pending = [i + 1 for i, t in enumerate(tracked) if self.state.history_from(t) is None]
        engines = self._engines(brand, engine)
        daily: list[tuple[dt.date, np.ndarray]] = []
        for day in self.world.days(window.start, window.end):
            counts = self.daily_counts(brand, day, engines)
            if counts is None:
                continue
            selected = counts[rows]
            selected[pending] = 0.0  # no history until the backfill after tracking completes
            daily.append((day, selected))

        buckets = metrics.group_by_bucket(daily, granularity)
        series_by_bucket = [(start, metrics.entities_metrics(counts)) for start, counts in buckets]
        total = sum((c for _, c in daily), np.zeros((len(rows), metrics.N_COUNTS)))
        totals = metrics.entities_metrics(total)

        def entity(i: int, tracking: Tracking | None) -> Row:
            if tracking is None:
                head: Row = {
                    "id": None,
                    "brand_name": brand.name,
                    "is_your_brand": True,
                    "domains": [brand.domain],
                    "history_from": self.world.history_start.isoformat(),
                }
            else:
                history_from = self.state.history_from(tracking)
                head = {
                    "id": tracking.competitor_id,
                    "brand_name": tracking.member.name,
                    "is_your_brand": False,
                    "domains": list(tracking.member.domains),
                    "history_from": history_from.isoformat() if history_from else None,
                }
            head["totals"] = totals[i]
            head["series"] = [{"date": start.isoformat(), **points[i]} for start, points in series_by_bucket]
            return head

        return {
            "granularity": granularity,
            "from": window.start.isoformat(),
            "to": window.end.isoformat(),
            "engine": engine,
            "brand": entity(0, None),
            "competitors": [entity(i + 1, t) for i, t in enumerate(tracked)],
        }

    # -- citations ----------------------------------------------------------------------------------

    @staticmethod
    def _prompt_mask(brand: Brand, topic_id: str | None) -> np.ndarray | None:
        if topic_id is None:
            return None
        return np.array([p.topic_id == topic_id for p in brand.prompts], dtype=bool)

    def citation_trend(
        self,
        brand: Brand,
        window: Window,
        engine: str | None,
        topic_id: str | None,
        domain: str | None,
        url: str | None,
    ) -> Row:
        """Citations of one page (``url``) or one root domain (``domain``, default: the brand's own)."""
        if url is not None:
            target_type, value = "url", url
            target_root = root_domain(urlsplit(url).hostname or "")
            match = np.zeros(len(brand.pages), dtype=bool)
            if url in brand.page_by_url:
                match[brand.page_by_url[url]] = True
        else:
            target_type, value = "domain", root_domain(domain or brand.domain)
            target_root = value
            match = brand.page_root == value if brand.pages else np.zeros(0, dtype=bool)
        mask = self._prompt_mask(brand, topic_id)
        engines = self._engines(brand, engine)
        points: list[tuple[dt.date, int, float, int]] = []
        for day in self.world.days(window.start, window.end):
            blocks = self._blocks(brand, day, engines)
            if not blocks:
                continue  # the brand did not run: no point at all
            citations, sum_position, total = 0, 0.0, 0
            for _, block in blocks:
                cited = block.cited_page if mask is None else block.cited_page[mask]
                valid = cited >= 0
                hits = valid & match[np.where(valid, cited, 0)] if match.size else np.zeros_like(valid)
                citations += int(hits.sum())
                sum_position += float((hits * _CITATION_POSITIONS[None, :]).sum())
                total += int(valid.sum())
            points.append((day, citations, sum_position, total))
        return {
            "target": {
                "type": target_type,
                "value": value,
                "is_own_domain": target_root == root_domain(brand.domain),
            },
            "series": [metrics.citation_point(*p) for p in points],
            "summary": metrics.citation_summary(points, window.midpoint),
        }

    def citation_urls(
        self, brand: Brand, window: Window, engine: str | None, topic_id: str | None, limit: int
    ) -> Row:
        """Most-cited pages over the window, ranked; the envelope carries totals over all pages."""
        mask = self._prompt_mask(brand, topic_id)
        engines = self._engines(brand, engine)
        pages: list[np.ndarray] = []
        positions: list[np.ndarray] = []
        for day in self.world.days(window.start, window.end):
            for _, block in self._blocks(brand, day, engines):
                cited = block.cited_page if mask is None else block.cited_page[mask]
                valid = cited >= 0
                pages.append(cited[valid])
                positions.append(np.broadcast_to(_CITATION_POSITIONS, cited.shape)[valid])
        n_pages = len(brand.pages)
        if pages:
            all_pages = np.concatenate(pages).astype(np.intp)
            counts = np.bincount(all_pages, minlength=n_pages)
            sums = np.bincount(all_pages, weights=np.concatenate(positions), minlength=n_pages)
        else:
            counts, sums = np.zeros(n_pages, dtype=np.int64), np.zeros(n_pages)
        order, total_count, total_citations = metrics.rank_pages(counts, sums, limit)
        rows = []
        # most pages share a few small counts and position sums: round each distinct ratio once
        avg_position: dict[tuple[float, int], float] = {}
        share: dict[int, float] = {}
        for i, count, position_sum in zip(order, counts[order].tolist(), sums[order].tolist(), strict=True):
            page = brand.pages[i]
            average = avg_position.get((position_sum, count))
            if average is None:
                average = avg_position[(position_sum, count)] = round(position_sum / count, 4)
            fraction = share.get(count)
            if fraction is None:
                fraction = share[count] = round(count / total_citations, 6) if total_citations else 0.0
            rows.append(
                {
                    "url": page.url,
                    "domain": page.domain,
                    "root_domain": page.root_domain,
                    "citation_count": count,
                    "avg_position": average,
                    "citation_share": fraction,
                }
            )
        return {
            "data": rows,
            "has_more": False,
            "next_cursor": None,
            "total_count": total_count,
            "total_citations": total_citations,
            "capped": total_count > len(rows),
        }
