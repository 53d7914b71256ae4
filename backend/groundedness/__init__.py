"""The groundedness check: the judge (claims against the context chunks that hold their
evidence, read as P(yes) by the chat model), the calibrations that turn its support into
verdicts, the service that answers checks on local models, and the request builder and
verdict reader that clients use."""
