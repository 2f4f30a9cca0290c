"""The evaluator service: organisers' side of PFL-DocVQA.

Participants upload a checkpoint, a communication log and (track 2) a privacy declaration;
workers validate and score them on the hidden test split and record everything in a database
the leaderboard reads. Layout (the FastAPI full-stack template's backend shape):

- ``core/config.py`` settings (environment ``PFLKIT_EVALUATOR_*``), ``core/db.py`` engine and
  Alembic migrations (``migrations/``), ``core/security.py`` tokens.
- ``models.py`` tables and public schemas, ``crud.py`` database operations and the state machine.
- ``api/deps.py`` dependencies, ``api/routes/`` one router per resource, ``main.py`` the app.
- ``storage.py`` streamed, atomic upload storage; ``queue.py`` the Huey queue;
  ``worker.py`` leases, scoring jobs and crash recovery; ``scoring.py`` the test-split scorer.
- ``validation/`` checkpoint, communication log and privacy declaration checks.
- ``cli.py`` ``pflkit serve|worker|team|submit``; ``client.py`` the submit client;
  ``loadtest.py`` the status-endpoint benchmark (``python -m evaluator.loadtest``).
"""
