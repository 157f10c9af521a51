"""Strategy programs; importing this package registers every method.

One module per program (see ARCHITECTURE.md). Each module registers its
methods with `strategy_opt.registry.register_method`.
"""

from . import baselines  # noqa: F401
from . import orthogonal  # noqa: F401
from . import workload_division  # noqa: F401
from . import eigen_design  # noqa: F401
from . import greedy_h  # noqa: F401
from . import dawa  # noqa: F401
from . import auto  # noqa: F401
from . import mwem  # noqa: F401
from . import minerror_l2  # noqa: F401
from . import svd_approx  # noqa: F401
from . import l1_weighting  # noqa: F401
from . import minerror_l1  # noqa: F401
from . import marginals_template  # noqa: F401
from . import pidentity  # noqa: F401
from . import auto_pure  # noqa: F401
