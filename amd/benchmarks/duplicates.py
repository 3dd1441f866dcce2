"""Exclusion groups: a benchmark's own task groups (a scenario and its variants), joined wherever two tasks are
duplicates. The leakage protocols keep an exclusion group together: under `self_excluded` no task retrieves memory
distilled from any task of its exclusion group, so a task never sees the solution of its twin.

Two tasks are duplicates when their signatures (`Benchmark.task_signature`) have equal normalised ground-truth
calls, or equal normalised checks, or instructions at least INSTRUCTION_SIMILARITY alike (difflib's ratio over the
lower-cased texts with runs of white space made one space). Duplicates join transitively. A merged group is named by
the benchmark's own group of its first task in task order, so a group that merged nothing keeps its name.

INSTRUCTION_SIMILARITY was calibrated on the task sets at hand (docs/guides/exclusion-groups.md): the most alike
instructions of two different tasks scored 0.919 (AgentDojo slack 18 and 19, Alice's and Bob's to-do lists); BFCL's
multi-turn base has no pair of different requests above 0.61.
"""

import difflib
import itertools
import logging
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

from amd.benchmarks.base import Benchmark, TaskSignature

INSTRUCTION_SIMILARITY = 0.95
KEYS = ("calls", "checks")  # signature fields compared for equality

log = logging.getLogger("amd.benchmarks")
_CACHE: "weakref.WeakKeyDictionary[Benchmark, ExclusionGroups]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Link:
    """Two tasks of different task groups found to be duplicates, and why: `calls`, `checks` or `instruction`."""

    first: str
    second: str
    reason: str
    similarity: float = 1.0


@dataclass(frozen=True)
class ExclusionGroups:
    """Task id -> exclusion group, over every task of a benchmark; `own` is the benchmark's own task group of each,
    `links` the duplicate pairs that joined groups."""

    groups: dict[str, str]
    own: dict[str, str]
    links: list[Link] = field(default_factory=list)

    def group(self, task_id: str, own_group: str) -> str:
        """A task's exclusion group (a task the benchmark does not list: its own group)."""
        return self.groups.get(task_id, own_group)

    def merged(self) -> dict[str, list[str]]:
        """Exclusion group -> the benchmark's own groups it joins, for those that join more than one."""
        joined: dict[str, list[str]] = {}
        for task_id, group in self.groups.items():
            if self.own[task_id] not in joined.setdefault(group, []):
                joined[group].append(self.own[task_id])
        return {group: owns for group, owns in joined.items() if len(owns) > 1}


def exclusion_groups(benchmark: Benchmark) -> ExclusionGroups:
    """The exclusion groups of every task of `benchmark` (computed once per benchmark object)."""
    try:
        return _CACHE[benchmark]
    except (KeyError, TypeError):  # not yet computed, or an object that cannot be weakly referenced
        pass
    task_ids = benchmark.task_ids()
    found = find_groups(task_ids, {task: benchmark.task_group(task) for task in task_ids},
                        {task: benchmark.task_signature(task) for task in task_ids})
    if found.links:
        log.info("%s: %d duplicate pairs join %d exclusion groups of its %d task groups (amd groups %s)",
                 benchmark.name, len(found.links), len(found.merged()), len(set(found.own.values())), benchmark.name)
    try:
        _CACHE[benchmark] = found
    except TypeError:
        pass
    return found


def find_groups(task_ids: list[str], own: dict[str, str], signatures: dict[str, TaskSignature]) -> ExclusionGroups:
    """Join the tasks' own groups wherever two tasks are duplicates; `task_ids` in the benchmark's order."""
    links: list[Link] = []
    linked: set[frozenset[str]] = set()  # pairs of own groups a link joins already: one link each is enough
    for link in _equal_links(task_ids, own, signatures, linked):
        if frozenset((own[link.first], own[link.second])) not in linked:
            linked.add(frozenset((own[link.first], own[link.second])))
            links.append(link)
    for link in _instruction_links(task_ids, own, signatures, linked):
        linked.add(frozenset((own[link.first], own[link.second])))
        links.append(link)
    root = {group: group for group in own.values()}

    def find(group: str) -> str:
        while root[group] != group:
            root[group] = root[root[group]]
            group = root[group]
        return group

    order = {group: index for index, group in reversed(list(enumerate(own[task] for task in task_ids)))}
    for link in links:
        first, second = sorted((find(own[link.first]), find(own[link.second])), key=order.__getitem__)
        root[second] = first
    return ExclusionGroups({task: find(own[task]) for task in task_ids}, dict(own), links)


def _equal_links(task_ids: list[str], own: dict[str, str], signatures: dict[str, TaskSignature],
                 linked: set[frozenset[str]]) -> Iterable[Link]:
    for key in KEYS:
        first_of: dict[str, str] = {}
        for task in task_ids:
            value = getattr(signatures[task], key)
            if value is None:
                continue
            first = first_of.setdefault(value, task)
            if own[first] != own[task] and frozenset((own[first], own[task])) not in linked:
                yield Link(first, task, key)


def _instruction_links(task_ids: list[str], own: dict[str, str], signatures: dict[str, TaskSignature],
                       linked: set[frozenset[str]]) -> Iterable[Link]:
    """Tasks with the same normalised instruction, each to the first that has it; then each such first task against
    the others (AgentDojo's injection pairs of a user task share its prompt: compared once)."""
    first_of: dict[str, str] = {}
    for task in task_ids:
        if (text := signatures[task].instruction) is None:
            continue
        first = first_of.setdefault(normalised(text), task)
        if own[first] != own[task] and frozenset((own[first], own[task])) not in linked:
            yield Link(first, task, "instruction")
    for (text, first), (other, second) in itertools.combinations(first_of.items(), 2):
        if own[first] == own[second] or frozenset((own[first], own[second])) in linked:
            continue
        similarity = instruction_similarity(text, other)
        if similarity >= INSTRUCTION_SIMILARITY:
            yield Link(first, second, "instruction", round(similarity, 3))


def normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def instruction_similarity(first: str, second: str, floor: float = INSTRUCTION_SIMILARITY) -> float:
    """difflib's ratio of two normalised texts; 0.0 where its cheap upper bounds already fall below `floor`."""
    matcher = difflib.SequenceMatcher(None, first, second, autojunk=False)
    if matcher.real_quick_ratio() < floor or matcher.quick_ratio() < floor:
        return 0.0
    return matcher.ratio()
