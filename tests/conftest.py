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
