"""strategy_opt: optimal query strategies for linear counting queries under differential privacy.

Compute a strategy A for a workload W (the matrix mechanism: answer A x with
noise, reconstruct by least squares), export it, and run it on data.

Examples
--------
>>> import strategy_opt as so
>>> s = so.solve("all-range:64", privacy="approx", method="wavelet")
>>> round(s.meta["ratio_to_lower_bound"], 3)
1.408
"""

__version__ = "0.1.0"

from .api import error_report, solve  # noqa: E402
from .privacy import ApproxDP, PureDP  # noqa: E402
from .spec import parse_spec  # noqa: E402
from .strategy import Strategy  # noqa: E402

__all__ = ["solve", "error_report", "parse_spec", "PureDP", "ApproxDP", "Strategy", "__version__"]
