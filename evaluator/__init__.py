"""The evaluator service: organisers' side of PFL-DocVQA.

Participants upload a checkpoint, a communication log and (track 2) a privacy declaration;
workers validate and score them on the hidden test split and record everything in a database
the leaderboard reads. Layout (the FastAPI full-stack template's backend shape):

- ``core/config.py`` settings (environment ``PFLKIT_EVALUATOR_*``), ``core/db.py`` engine and
  Alembic migrations (``migrations/``), ``core/security.py`` tokens, ``core/throttle.py`` the
  failed-authentication throttle, ``core/headers.py`` the security headers.
- ``models.py`` tables and public schemas, ``crud/`` database operations (one module per resource).
- ``api/deps.py`` dependencies, ``api/routes/`` one router per resource, ``main.py`` the app.
- ``storage.py`` streamed, atomic upload storage; ``queue.py`` the Huey queue;
  ``worker/`` the scoring worker (``runner.py`` leases and jobs, ``steps.py`` the checks and
  scores, ``reaper.py`` crash recovery, ``loop.py`` the process); ``scoring.py`` the test-split
  scorer.
- ``validation/`` checkpoint, communication log, privacy declaration and small-JSON checks;
  ``federation.py`` the benchmark's clients and providers; ``team_names.py`` team names.
- ``cli.py`` ``pflkit worker|team|submit``; ``client.py`` the submit client. ``pflkit serve``
  and the app that adds the leaderboard's pages are in ``pflkit/`` (above this package); the
  load and speed scripts are in ``bench/``.
"""
