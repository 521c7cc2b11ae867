"""``tf.data.Options``: settings that apply to a whole pipeline (``ds.with_options(options)``)."""


class AutotuneOptions:
    """``tf.data.experimental.AutotuneOptions``: the budgets autotuned stages share."""

    def __init__(self):
        #: How many workers the autotuned parallel stages may use together (default: the
        #: number of cores).
        self.cpu_budget = None
        #: How many bytes the pipeline's buffers may hold together (default: half the memory).
        self.ram_budget = None


class Options:
    """``tf.data.Options``. Attributes left ``None`` keep streamload's defaults.

    - ``deterministic``: ``False`` lets parallel stages (``map`` with ``num_parallel_calls``,
      ``interleave`` with ``num_parallel_calls``) hand out elements as they finish; such an
      epoch cannot be checkpointed. (``experimental_deterministic`` is the same setting.)
    - ``seed``: a global seed, as ``tf.random.set_seed``: every random operation without a
      seed of its own (``shuffle``, ``list_files``) derives one from it.
    - ``stats_timing``: also time each stage, so ``Iterator.stats()`` names the bottleneck.
    - ``autotune.cpu_budget``, ``autotune.ram_budget``: the budgets of the autotuned stages.
    """

    def __init__(self):
        self.deterministic = None
        self.seed = None
        self.stats_timing = None
        self.autotune = AutotuneOptions()

    @property
    def experimental_deterministic(self):
        return self.deterministic

    @experimental_deterministic.setter
    def experimental_deterministic(self, value):
        self.deterministic = value


__all__ = ["Options", "AutotuneOptions"]
