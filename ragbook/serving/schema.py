"""The JSON schema ``GET /schema`` serves: what ``ragbook serve``'s endpoints take and give
(JSON Schema 2020-12), so a client can be checked or generated without reading the code."""
from __future__ import annotations

__all__ = ["SCHEMA"]

_VALUES = {"anyOf": [{"type": "string", "minLength": 1},
                     {"type": "array", "items": {"type": "string", "minLength": 1},
                      "minItems": 1}]}

_HIT = {"type": "object", "required": ["id", "doc_id", "text"], "properties": {
    "id": {"type": "string"}, "doc_id": {"type": "string"},
    "start": {"type": ["integer", "null"], "description": "the chunk's first character in "
                                                          "its document"},
    "end": {"type": ["integer", "null"]}, "score": {"type": "number"},
    "rank": {"type": "integer"}, "text": {"type": "string"}, "metadata": {"type": "object"}}}

_RESULT = {"type": "object", "description": "Pipeline.ask(question, scope=...).to_dict()",
           "required": ["question", "answer", "escalated", "reason", "sources", "candidates"],
           "properties": {
               "question": {"type": "string"}, "condensed": {"type": "string"},
               "answer": {"type": ["string", "null"], "description": "null when escalated"},
               "escalated": {"type": "boolean"},
               "reason": {"type": ["string", "null"], "description": "one of "
                          "ragbook.ESCALATIONS when escalated"},
               "detail": {"type": "string"},
               "answer_span": {"type": ["array", "null"], "prefixItems": [
                   {"type": "string"}, {"type": "integer"}, {"type": "integer"}],
                   "description": "[doc_id, start, end] of the answer in its document"},
               "answer_scores": {"type": "array", "items": {"type": "number"}},
               "confidence": {"type": ["number", "null"]},
               "confidence_kind": {"type": ["string", "null"]},
               "sources": {"type": "array", "items": {"$ref": "#/$defs/Hit"}},
               "candidates": {"type": "array", "items": {"$ref": "#/$defs/Hit"}},
               "trace": {"type": "array", "items": {"type": "object"}}}}

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type"],
    "properties": {"message": {"type": "string"}, "type": {"type": "string"}}}}}

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ragbook serve",
    "$defs": {
        "AskRequest": {"type": "object", "required": ["question"],
                       "additionalProperties": False, "properties": {
                           "question": {"type": "string", "minLength": 1},
                           "scope": {"type": "object", "minProperties": 1,
                                     "additionalProperties": _VALUES,
                                     "description": "narrows the server's scope (per API "
                                     "key, or server-wide); asking for more is 403"}}},
        "DocumentRequest": {"type": "object", "required": ["doc_id"],
                            "additionalProperties": False, "properties": {
                                "doc_id": {"type": "string", "minLength": 1},
                                "scope": {"type": "object", "minProperties": 1,
                                          "additionalProperties": _VALUES}}},
        "Document": {"type": "object", "required": ["doc_id", "segments"], "properties": {
            "doc_id": {"type": "string"},
            "segments": {"type": "array", "description": "[start, text] runs of the "
                         "document's text as the index holds it (offsets are the document's, "
                         "as answer_span's)", "items": {"type": "array", "prefixItems": [
                             {"type": "integer"}, {"type": "string"}]}}}},
        "Hit": _HIT, "Result": _RESULT, "Error": _ERROR,
        "Explained": {"type": "object", "required": ["result", "explanations"], "properties": {
            "result": {"$ref": "#/$defs/Result"},
            "explanations": {"type": "array", "description": "per source, its explanations "
                             "(parts that add up to its score; the filter conditions it met)",
                             "items": {"type": "array", "items": {"type": "object"}}}}},
    },
    "endpoints": {
        "GET /": {"response": "text/html: the page"},
        "GET /schema": {"response": "application/json: this schema"},
        "POST /ask": {"request": {"$ref": "#/$defs/AskRequest"},
                      "response": {"$ref": "#/$defs/Result"}},
        "POST /stream": {"request": {"$ref": "#/$defs/AskRequest"},
                         "response": "text/event-stream: 'sentence' events ({\"text\"}: each "
                         "verified sentence as Pipeline.stream releases it), then one "
                         "'result' event (a Result); or an 'error' event ({\"message\"})"},
        "POST /explain": {"request": {"$ref": "#/$defs/AskRequest"},
                          "response": {"$ref": "#/$defs/Explained"}},
        "POST /document": {"request": {"$ref": "#/$defs/DocumentRequest"},
                           "response": {"$ref": "#/$defs/Document"},
                           "404": "no such document in the server's scope"},
        "errors": {"response": {"$ref": "#/$defs/Error"}, "statuses": {
            "400": "malformed request", "401": "missing or unknown API key",
            "404": "no such document in scope",
            "403": "foreign Origin, or a scope wider than the server grants",
            "408": "body too slow", "413": "body too large", "415": "not application/json",
            "421": "Host is not this server", "431": "headers too large",
            "500": "the server failed (details in its log, not the reply)",
            "503": "over the deadline, or the queue is full (Retry-After)"}},
    },
}
