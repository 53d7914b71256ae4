"""Chat completions above the engines: prompt rendering through the model's chat template,
tool calls (recognised, parsed and constrained by one set of rules), generation, output
processing shared by streaming and non-streaming, the response objects, and the check that
a generated call is wanted. ``ChatService`` joins them for one engine."""
