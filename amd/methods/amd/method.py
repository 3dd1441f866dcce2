"""AMD as a memory method (amd.memory.method.MemoryMethod): the bank is built from the successful records, and a run
opens frozen hooks (`retrieval.py`) or, with the run option `online`, hooks whose bank grows (`online.py`)."""

from collections import Counter

from amd.core.errors import AmdError
from amd.memory.bank import BankContents
from amd.methods.amd.entries import SUBTASK_KEY_FIELD, BuildSettings, build_entries, successful
from amd.methods.amd.render import check_representation, parse_representation
from amd.methods.amd.retrieval import AmdHooks
from amd.methods.amd.spec import AMD_TYPES, REPRESENTATIONS

AUDIT_KEYS = ("insights_repaired", "insights_rejected", "insights_trimmed", "values_replaced", "writer_fallbacks")
AUDITED = ("dropped", "edited")  # the manifest's `audited`: the insights the audit dropped (task, reason), edited (id)


class AmdMemory:
    name = "amd"
    version = "1"

    def build(self, records: list[dict], context) -> BankContents:
        """Entries of the successful records (the first per task). Build option `representation` (e.g.
        wf=prose,st=code,fn=code) is the bank's default rendering; both forms are stored either way. The others
        say how entries are written (entries.BuildSettings)."""
        representation = check_representation(parse_representation(context.options.get("representation", "")))
        settings = BuildSettings.from_options(context.options)
        used = successful(records)
        results = context.map(lambda record: build_entries(record, context.benchmark(record["benchmark"]),
                                                           context.writer.chat, settings=settings), used)
        entries = {t.name: [entry for result in results for entry in getattr(result, t.name)] for t in AMD_TYPES}
        audit: Counter[str]
        audit = sum((result.audit for result in results), Counter())
        audited = {what: [item for result in results for item in result.audited[what]] for what in AUDITED}
        embedded = {t.name: t.embedded for t in AMD_TYPES}
        if settings.subtask_key == "label_description":
            embedded["subtask"] = SUBTASK_KEY_FIELD
        return BankContents(
            entries=entries, embedded=embedded,
            manifest={"representation": {"stored": list(REPRESENTATIONS), "default": representation},
                      **({"build_settings": settings.describe()} if settings != BuildSettings() else {}),
                      "successful_task_ids": sorted(record["task_id"] for record in used),
                      "audit": {key: audit.get(key, 0) for key in AUDIT_KEYS}, "audited": audited})

    def open(self, bank, config, settings) -> AmdHooks:
        if settings.options.get("online", False):
            from amd.methods.amd.online import OnlineAmdHooks

            return OnlineAmdHooks(bank, config, settings)
        stray = sorted(key for key in settings.options if key.startswith("online_"))
        if stray:
            raise AmdError(f"memory options {', '.join(stray)} need online=true (amd run --online)")
        return AmdHooks(bank, config, settings)
