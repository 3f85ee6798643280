"""The source of an import finder that makes a child interpreter import ``rollout_graph`` from
another checkout (its ``graph/``, ``views/`` and ``sample_traces/``, as the editable install maps
this checkout's), for the scripts that run two checkouts side by side (bench_analyse.py,
same_inspect.py). The child's code starts with it and defines ``root`` (the checkout's folder)
before it, and imports ``importlib.util`` and ``sys``."""

CHECKOUT_FINDER = """folders = {"rollout_graph": "graph", "rollout_graph.ui": "views", "rollout_graph.samples": "sample_traces"}

class Checkout:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in folders:
            return None
        folder = f"{root}/{folders[name]}"
        return importlib.util.spec_from_file_location(name, f"{folder}/__init__.py", submodule_search_locations=[folder])

sys.meta_path.insert(0, Checkout)
"""
