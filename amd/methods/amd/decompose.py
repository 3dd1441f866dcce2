"""The student's subtask decomposition (paper Appendix C): instruction -> at most six verb-phrase labels.

Beyond the paper, a checked decomposition: n samples of the same prompt (temperature > 0, a distinct seed each),
merged by agreement. Labels of all samples are clustered by word overlap (Jaccard similarity of their content words
at least one half, leader clustering in sample order); a cluster is kept when more than half of the samples have a
label in it, shown as its most frequent wording, in the order the samples put it (mean relative position). Word
overlap, not embeddings: labels are verb phrases of at most five words from one prompt, so paraphrases share their
words, and a threshold on words does not depend on an embedder's similarity scale (as δ does). When no cluster has a
majority the samples agree on nothing and the single-shot labels are kept.
"""

import logging
import re
from collections import Counter
from dataclasses import dataclass, field

from amd.core.prompts import load_prompt
from amd.memory.writing import json_array_in
from amd.methods.amd.spec import MAX_DECOMPOSE_SAMPLES

log = logging.getLogger("amd.memory")
MAX_LABELS = 6
# Sample i of a run whose seed is s is sent with seed SAMPLE_SEED_STRIDE * (s + 1) + i: never a run's own seed and
# distinct across repeats, so no sample is another request's cached reply.
SAMPLE_SEED_STRIDE = 1000
MAX_SAMPLES = MAX_DECOMPOSE_SAMPLES
SAME_SUBTASK_JACCARD = 0.5  # two labels name one subtask when at least half of their words together are shared
STOP_WORDS = frozenset({"a", "an", "the", "to", "of", "for", "and", "or", "in", "on", "at", "with", "from", "into",
                        "by", "my", "your", "all"})


def decompose_instruction(chat, instruction: str, prompt: str = "decompose") -> list[str]:
    """Labels from `chat` (messages -> ChatReply) via prompts/decompose.md (or the benchmark's own, `prompt`);
    [instruction] when the answer is not a JSON array of strings (logged)."""
    return ask_labels(chat, instruction, prompt=prompt) or [instruction]


def ask_labels(chat, instruction: str, sampling: dict | None = None, prompt: str = "decompose") -> list[str] | None:
    """At most MAX_LABELS labels from one answer of `chat` (with `sampling` overrides, if any), or None when the
    answer is unusable (logged)."""
    messages = [{"role": "user", "content": load_prompt(prompt).format(instruction=instruction)}]
    reply = chat(messages) if sampling is None else chat(messages, sampling=sampling)
    labels = None if reply.error else parse_labels(reply.text or "")
    if not labels:
        outcome = "using the instruction as the only label" if sampling is None else \
            f"the sample with seed {sampling.get('seed')} names no subtask"
        log.warning("decomposition unusable (%s); %s", reply.error or repr((reply.text or "")[:80]), outcome)
        return None
    if len(labels) > MAX_LABELS:
        log.info("decomposition gave %d labels; kept the first %d", len(labels), MAX_LABELS)
    return labels[:MAX_LABELS]


def parse_labels(text: str) -> list[str] | None:
    items, _ = json_array_in(text)
    if items is None:
        return None
    labels = [" ".join(item.split()) for item in items if isinstance(item, str) and item.strip()]
    return list(dict.fromkeys(labels)) or None


# ---- checked decomposition ------------------------------------------------------------------------------------------

@dataclass
class CheckedDecomposition:
    single_shot: list[str]  # the paper's one answer (the run's own sampling)
    merged: list[str]  # what retrieval uses
    samples: list[list[str]]  # each sample's labels ([] for an unusable answer)
    seeds: list[int]
    temperature: float
    support: list[int]  # per merged label, how many samples have it
    agreed: bool  # some label had a majority; False: merged is the single-shot answer

    @property
    def differs(self) -> bool:
        """The merged labels are not the single-shot ones (compared as sets of lower-cased labels)."""
        return {label.lower() for label in self.merged} != {label.lower() for label in self.single_shot}

    def record(self) -> dict:
        """The trajectory's `memory_details.decomposition`."""
        return {"single_shot": self.single_shot, "merged": self.merged, "differs": self.differs,
                "agreed": self.agreed, "support": self.support, "samples": self.samples, "seeds": self.seeds,
                "temperature": self.temperature}


def sample_seeds(run_seed: int | None, n: int) -> list[int]:
    return [SAMPLE_SEED_STRIDE * ((run_seed or 0) + 1) + i for i in range(n)]


def checked_decomposition(chat, instruction: str, n: int, temperature: float,
                          run_seed: int | None, prompt: str = "decompose") -> CheckedDecomposition:
    """The single-shot labels and n sampled ones, merged by agreement (module docstring)."""
    single_shot = decompose_instruction(chat, instruction, prompt)
    seeds = sample_seeds(run_seed, n)
    samples = [ask_labels(chat, instruction, {"temperature": temperature, "seed": seed}, prompt) or []
               for seed in seeds]
    merged = merge_by_agreement(samples)
    if not merged:
        log.info("decomposition samples agree on no subtask; using the single-shot labels")
    return CheckedDecomposition(single_shot, [label for label, _ in merged] or single_shot, samples, seeds,
                                temperature, [support for _, support in merged], bool(merged))


@dataclass
class _Cluster:
    words: frozenset  # its first label's content words
    wordings: Counter = field(default_factory=Counter)
    samples: set = field(default_factory=set)
    positions: list = field(default_factory=list)  # relative positions (0 = first label of a sample)


def merge_by_agreement(samples: list[list[str]]) -> list[tuple[str, int]]:
    """(label, number of samples that have it) for every subtask more than half of the samples name, in order."""
    clusters: list[_Cluster] = []
    for index, labels in enumerate(samples):
        for position, label in enumerate(labels):
            words = content_words(label)
            cluster = next((c for c in clusters if jaccard(c.words, words) >= SAME_SUBTASK_JACCARD), None)
            if cluster is None:
                cluster = _Cluster(words)
                clusters.append(cluster)
            cluster.wordings[label] += 1
            cluster.samples.add(index)
            cluster.positions.append(position / len(labels))
    kept = [c for c in clusters if 2 * len(c.samples) > len(samples)]
    kept.sort(key=lambda c: sum(c.positions) / len(c.positions))  # stable: the first seen first on ties
    return [(c.wordings.most_common(1)[0][0], len(c.samples)) for c in kept][:MAX_LABELS]


def content_words(label: str) -> frozenset:
    words = re.findall(r"[a-z0-9]+", label.lower())
    return frozenset(word for word in words if word not in STOP_WORDS) or frozenset(words)


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0
