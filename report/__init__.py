"""The visual report: share of voice, visibility by engine and top cited pages, as a PNG or HTML page.

Dagster-free, so the CLI (``visibility-sync report``) and the ``visibility_report`` asset share it:
:mod:`report.data` reads the warehouse, :mod:`report.render` draws (pure, matplotlib imported lazily).
"""

#: The window's default and largest length in days (here, so the CLI's parser reads them without
#: importing the warehouse modules).
DEFAULT_DAYS = 28
MAX_DAYS = 365
