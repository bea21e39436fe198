"""The connection use cases on the twins of the ``app`` fixture."""

import pytest

from tests.support.connection_kit import Kit, make_kit
from tests.support.twins import App


@pytest.fixture
def kit(app: App) -> Kit:
    return make_kit(app)
