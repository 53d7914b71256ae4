"""The service's API as data: wire schemas, typed errors, the model catalogue, request
validation and limits, and server-sent events. Nothing here runs a model or opens a
connection; every other room of ``backend`` builds on it."""
