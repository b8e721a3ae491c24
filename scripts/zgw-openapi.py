#!/usr/bin/env python3
"""Makes the OpenAPI document the hub serves at /api/v1/schema/openapi.{yaml,json}: VNG's
Notificaties API 1.0 (EUPL, specs/vng-notificaties/) with only the operations the
hub implements, so that a ZGW client reading it finds no operation that is not there.

    python3 scripts/zgw-openapi.py specs/vng-notificaties/notificaties-api-1.0.yaml
"""
import copy
import json
import pathlib
import sys

import yaml

# The operations the hub serves, by path and method.
SERVED = {
    "/abonnement": {"get", "post"},
    "/abonnement/{uuid}": {"get", "put", "patch", "delete"},
    "/kanaal": {"get", "post"},
    "/kanaal/{uuid}": {"get", "put", "patch"},
    "/notificaties": {"post"},
}

source = pathlib.Path(sys.argv[1])
document = yaml.safe_load(source.read_text())
paths = {}
for path, item in document["paths"].items():
    if path not in SERVED:
        continue
    kept = {k: v for k, v in item.items() if k not in {"get", "post", "put", "patch", "delete"} or k in SERVED[path]}
    paths[path] = kept
document["paths"] = paths
# VNG's document lists no errors for publishing a notificatie, though it is refused like
# any other request (Open Notificaties answers 400, 401, 403 too): the hub's document lists
# the ones `POST /kanaal` lists.
errors = {code: answer for code, answer in paths["/kanaal"]["post"]["responses"].items() if code != "201"}
# The hub answers 201, which the ZGW clients in use expect of a create (gemma-zds-client
# asserts it); VNG's document says 200: both are listed.
responses = paths["/notificaties"]["post"]["responses"]
responses["201"] = dict(responses["200"], description="Created")
for code, answer in errors.items():
    paths["/notificaties"]["post"]["responses"].setdefault(code, answer)
# Open Notificaties serves `PUT` and `PATCH /kanaal/{uuid}` (experimental; every Open Zaak
# deploy runs `register_kanalen`, which replaces a kanaal that exists): made as the
# abonnement's, for a kanaal.
for method, operation in [("put", "kanaal_update"), ("patch", "kanaal_partial_update")]:
    made = copy.deepcopy(document["paths"]["/abonnement/{uuid}"][method])
    made["operationId"] = operation
    made["description"] = (
        "Werk de documentatielink en filters van een KANAAL bij (experimenteel, zoals Open "
        "Notificaties het biedt; de naam wijzigt niet)."
        + (" Alleen de meegestuurde velden wijzigen." if method == "patch" else "")
    )
    made["tags"] = ["kanaal"]
    made["requestBody"] = {
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Kanaal"}}},
        "required": True,
    }
    made["responses"]["200"]["content"] = {
        "application/json": {"schema": {"$ref": "#/components/schemas/Kanaal"}}
    }
    paths["/kanaal/{uuid}"][method] = made
# Open Notificaties serves `POST /cloudevents` (experimental): a CloudEvent in, 201 with it.
cloud_event = {
    "type": "object",
    "description": "Een CloudEvent (CloudEvents 1.0, JSON-formaat); ook in de binaire modus "
    "van de HTTP-binding (`ce-`-headers) of als `application/cloudevents+json`.",
    "required": ["id", "source", "specversion", "type"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "source": {"type": "string", "format": "uri-reference", "minLength": 1},
        "specversion": {"type": "string", "enum": ["1.0"]},
        "type": {"type": "string", "minLength": 1},
        "datacontenttype": {"type": "string"},
        "dataschema": {"type": "string", "format": "uri"},
        "subject": {"type": "string"},
        "time": {"type": "string", "format": "date-time"},
        "data": {},
        "data_base64": {"type": "string"},
    },
    "additionalProperties": True,
}
document["components"]["schemas"]["CloudEvent"] = cloud_event
publish = copy.deepcopy(paths["/notificaties"]["post"])
publish["operationId"] = "cloudevent_create"
publish["description"] = (
    "Publiceer een CloudEvent (experimenteel, zoals Open Notificaties het biedt): het gaat "
    "naar elk abonnement en elke CloudEvents-subscription van zijn type."
)
publish["tags"] = ["cloudevents"]
body = {"schema": {"$ref": "#/components/schemas/CloudEvent"}}
publish["requestBody"] = {
    "content": {"application/json": body, "application/cloudevents+json": body},
    "required": True,
}
publish["responses"].pop("200", None)
publish["responses"]["201"] = copy.deepcopy(publish["responses"]["201"])
publish["responses"]["201"]["content"] = {"application/json": body}
paths["/cloudevents"] = {"post": publish}
document["info"]["description"] = (
    document["info"]["description"]
    + "\n\n**Knooppunt** serves the operations of this document (VNG's Notificaties API 1.0, "
    "EUPL) that it implements; the others are left out until it does. Publishing a "
    "notificatie lists the errors it can answer, which VNG's document leaves out."
)
# Open Notificaties' experimental members of an abonnement: it receives CloudEvents, of the
# types containing one of its substrings, whose data passes its filters (docs/zgw.md).
abonnement = document["components"]["schemas"]["Abonnement"]
abonnement["properties"]["sendCloudevents"] = {
    "type": "boolean",
    "default": False,
    "description": "Experimenteel: het abonnement ontvangt CloudEvents "
    "(`application/cloudevents+json`); een notificatie als het CloudEvent dat Open "
    "Notificaties ervan maakt.",
}
abonnement["properties"]["cloudeventFilters"] = {
    "type": "array",
    "description": "Experimenteel: de CloudEvents waarvan het type een van deze teksten bevat "
    "en waarvan de data door de filters komt (het lid is die tekst, de waarde is `*`, of "
    "het lid ontbreekt).",
    "items": {
        "type": "object",
        "required": ["typeSubstring"],
        "properties": {
            "typeSubstring": {"type": "string", "minLength": 1, "maxLength": 255},
            "filters": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
}
abonnement["properties"]["bezorging"] = {
    "type": "object",
    "readOnly": True,
    "description": "Alleen bij het opvragen van één ABONNEMENT (niet in Open Notificaties): "
    "hoe de bezorging gaat. `status` (`actief`, `wachtend`, `uitgeschakeld`) met `reden`, "
    "`achterstand` (notificaties die nog bezorgd worden), `dodeBrieven` en "
    "`laatstePoging` (`tijdstip`, `uitkomst`: `delivered`, `retry` of `deadLetter`, "
    "`httpStatus`, `fout`).",
    "properties": {
        "status": {"type": "string", "enum": ["actief", "wachtend", "uitgeschakeld", "onbekend"]},
        "reden": {"type": "string", "nullable": True},
        "achterstand": {"type": "integer"},
        "dodeBrieven": {"type": "integer"},
        "laatstePoging": {
            "type": "object",
            "properties": {
                "tijdstip": {"type": "string", "format": "date-time"},
                "uitkomst": {"type": "string"},
                "httpStatus": {"type": "integer", "nullable": True},
                "fout": {"type": "string", "nullable": True},
            },
        },
    },
}
if "kanalen" in abonnement.get("required", []):
    abonnement["required"] = [r for r in abonnement["required"] if r != "kanalen"]
# Without `kanalen` an abonnement needs `cloudeventFilters`, as Open Notificaties asks.
abonnement["description"] = (
    abonnement.get("description", "").rstrip()
    + "\n\nEen ABONNEMENT heeft `kanalen` (1 tot 100), `cloudeventFilters`, of beide; "
    "zonder een van beide wordt het geweigerd (400)."
).strip()
# `auth` is sent to the callback, never returned (as Open Notificaties does): write-only.
document["components"]["schemas"]["Abonnement"]["properties"]["auth"]["writeOnly"] = True
document["tags"] = [t for t in document.get("tags", []) if t.get("name") in {"abonnement", "kanaal", "notificaties"}]
document["tags"].append({"name": "cloudevents", "description": "Publiceren van CloudEvents (experimenteel)."})
out = pathlib.Path(__file__).resolve().parent.parent / "crates/knooppunt-facade/assets"
(out / "openapi.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
(out / "openapi.yaml").write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
print("written", out)
