import pytest
import torch


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture
def single_thread():
    """One PyTorch thread for the test: tiny models gain nothing from more, and on a shared
    machine a second OpenMP thread waiting for a busy core makes every small op slow."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# The files that hold the suite's longest tests (a model learning a task, processes of their own).
# `make test` runs two workers, a file each at a time: these go first, so that the two finish
# together instead of one waiting alone on a long file that came last.
LONGEST_FIRST = (
    "test_universal.py",
    "test_parse.py",
    "test_bench_algorithmic.py",
    "test_m2m100_finetune.py",
    "test_train_nodes.py",
    "test_train.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = {name: rank for rank, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(order)))  # stable: the rest as collected
