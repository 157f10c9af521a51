"""Execute every notebook in notebooks/ (the tutorials must run as shipped)."""

from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
#: A kernel of this interpreter, written to a temporary Jupyter path: a kernelspec
#: installed elsewhere (for another environment) can neither shadow nor break it.
KERNEL = "strategy-opt-tests"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    kernelspec = pytest.importorskip("ipykernel.kernelspec")
    root = tmp_path_factory.mktemp("jupyter")
    kernelspec.write_kernel_spec(path=str(root / "kernels" / KERNEL))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(root))
    yield KERNEL
    mp.undo()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, kernel_name):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name=kernel_name, resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
