"""Strategy programs; importing this package registers every method.

One module per program (see ARCHITECTURE.md). Each module registers its
methods with `strategy_opt.registry.register_method`.
"""

from . import baselines  # noqa: F401
