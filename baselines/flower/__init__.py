"""The kit's federation on Flower's engines (deployment: SuperLink and SuperNodes; simulation).

``server_app.py`` is a Flower ``ServerApp`` that runs :class:`~baselines.engine.simulation.FederatedSimulation`
with the clients' part of each round sent to SuperNodes; ``client_app.py`` is the ``ClientApp``
that runs :class:`~baselines.engine.client.FederatedClient` on the node's own clients. Messages carry the
kit's wire payloads byte for byte (``records.py``), so the communication log, the privacy
declaration and the weights are those of the in-process engine for the same seed.

flwr lives in ``.venv-flower`` (``make flower-setup``), never in the main environment: its pins
of fastapi, starlette and uvicorn differ from the evaluator's. Importing this package does not
import flwr; :func:`require_flwr` says what to do when it is missing.
"""

from __future__ import annotations

FLOWER_SETUP_HINT = (
    "Flower (flwr 1.41) is not installed in this environment: run `make flower-setup` and use "
    "`.venv-flower/bin/pflkit` (flwr pins fastapi/starlette/uvicorn versions the main .venv "
    "does not take, so it has an environment of its own)"
)


def require_flwr() -> None:
    """Fail with :data:`FLOWER_SETUP_HINT` when flwr cannot be imported.

    Raises:
        RuntimeError: flwr is missing.
    """
    try:
        import flwr  # noqa: F401
    except ImportError as error:
        raise RuntimeError(FLOWER_SETUP_HINT) from error
