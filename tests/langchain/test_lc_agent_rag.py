"""End-to-end LangChain use on the real small-profile models: an agent that calls a tool and
answers from its result, and a RAG chain whose answer is checked for groundedness."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_core_ext import ChatCore, CoreEmbeddings, CoreGroundednessCheck

pytestmark = pytest.mark.model

TRACKING_NUMBER = "ZX-9931"  # only the tool knows it


@tool
def get_order_status(order_id: str) -> str:
    """Look up the shipping status and tracking number of an order by its id."""
    return f"Order {order_id} has shipped; its tracking number is {TRACKING_NUMBER}."


def test_agent_calls_the_tool_and_answers_from_its_result(small_backend):
    from langchain.agents import create_agent

    llm = ChatCore(backend=small_backend, temperature=0, max_tokens=64)
    agent = create_agent(
        llm,
        tools=[get_order_status],
        system_prompt="You help customers with their orders. Use the tools to look orders up.",
    )
    result = agent.invoke(
        {"messages": [HumanMessage("What is the tracking number of order A-1234?")]}
    )
    messages = result["messages"]
    calls = [call for m in messages if isinstance(m, AIMessage) for call in m.tool_calls]
    assert [c["name"] for c in calls][:1] == ["get_order_status"]
    assert "A-1234" in calls[0]["args"]["order_id"]
    assert any(isinstance(m, ToolMessage) and TRACKING_NUMBER in m.content for m in messages)
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert TRACKING_NUMBER in final.text


DOCUMENTS = [
    Document(
        "The Zorblat festival takes place every April in the mountain town of Kellmere.",
        metadata={"id": "festival"},
    ),
    Document("Kellmere's old bakery is famous for its dark rye bread.", metadata={"id": "bakery"}),
    Document(
        "Python is a programming language created by Guido van Rossum.", metadata={"id": "python"}
    ),
    Document("The Pacific is the largest ocean on Earth.", metadata={"id": "ocean"}),
]
QUESTION = "In which month does the Zorblat festival take place?"


def _joined(docs: list[Document]) -> str:
    return "\n\n".join(doc.page_content for doc in docs)


async def test_rag_chain_answers_from_retrieved_documents_and_is_grounded(small_backend):
    store = await InMemoryVectorStore.afrom_documents(
        DOCUMENTS, CoreEmbeddings(backend=small_backend)
    )
    retriever = store.as_retriever(search_kwargs={"k": 2})
    retrieved = await retriever.ainvoke(QUESTION)
    assert retrieved[0].metadata["id"] == "festival"

    prompt = ChatPromptTemplate.from_messages(
        [
            (
                "system",
                "Answer the question in one short sentence, using only this context:\n\n{context}",
            ),
            ("human", "{question}"),
        ]
    )
    llm = ChatCore(backend=small_backend, temperature=0, max_tokens=32)
    chain = (
        {"context": retriever | _joined, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    answer = await chain.ainvoke(QUESTION)
    assert "April" in answer

    check = CoreGroundednessCheck(backend=small_backend)
    assert await check.ainvoke({"context": retrieved, "answer": answer}) == "grounded"
    wrong = "The Zorblat festival takes place every December in Berlin."
    assert check.invoke({"context": retrieved, "answer": wrong}) != "grounded"
