"""LlamaIndex integration of core-textmodels: the chat models as an LLM with function calling
and streaming, the query/passage embeddings, and the groundedness check as an evaluator.

>>> from llama_index.core import Settings, VectorStoreIndex
>>> from llamaindex_core_ext import Core, CoreEmbedding, CoreGroundednessEvaluator
>>> Settings.llm, Settings.embed_model = Core(temperature=0), CoreEmbedding()
>>> index = VectorStoreIndex.from_documents(documents)
>>> response = index.as_query_engine().query("...")
>>> CoreGroundednessEvaluator().evaluate_response(response=response).passing

Without ``base_url`` (or ``CORE_BASE_URL``) the models run in this process, loaded once and
shared by all three; with it, requests go to that server.
"""

from llamaindex_core_ext.embeddings import CoreEmbedding
from llamaindex_core_ext.evaluation import CoreGroundednessEvaluator
from llamaindex_core_ext.llms import Core

__all__ = ["Core", "CoreEmbedding", "CoreGroundednessEvaluator"]
