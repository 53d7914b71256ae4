"""The implementations of ``backend.interface.Backend``, one folder each: the service in this
process (``local``), the HTTP client of a server of this API (``client``), and the service in
front of OpenAI-compatible engines (``remote_engine``). Import them from their folders or
through ``backend.connect``; this package imports none of them, so choosing one loads only it."""
