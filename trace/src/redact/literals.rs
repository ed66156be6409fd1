//! What is a literal: the request and reply fields whose values are names,
//! options or specs (kept), and how the values under each key are treated.

/// Request fields whose values are names, options or specs, never user data.
pub(super) const KEEP: &[&str] = &[
    "$db",
    "lsid",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "$clusterTime",
    "$readPreference",
    "readConcern",
    "writeConcern",
    "maxTimeMS",
    "batchSize",
    "limit",
    "skip",
    "singleBatch",
    "sort",
    "projection",
    "fields",
    "hint",
    "collation",
    "ordered",
    "bypassDocumentValidation",
    "new",
    "upsert",
    "remove",
    "multi",
    "cursor",
    "collection",
    "key",
    "allowDiskUse",
    "verbosity",
    "nameOnly",
    "authorizedCollections",
    "indexes",
    "index",
    "client",
    "compression",
    "helloOk",
    "topologyVersion",
    "maxAwaitTimeMS",
    "loadBalanced",
    "awaitData",
    "tailable",
    "noCursorTimeout",
    "returnKey",
    "showRecordId",
    "allowPartialResults",
    "nsInfo",
    "errorsOnly",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "$orderby",
    "$hint",
    "$explain",
    "$snapshot",
    "$maxTimeMS",
    "cursors",
];

/// Reply fields that are counts, codes and cluster facts.
pub(super) const REPLY_KEEP: &[&str] = &[
    "ok",
    "n",
    "nModified",
    "nMatched",
    "nUpserted",
    "nInserted",
    "nDeleted",
    "nErrors",
    "code",
    "codeName",
    "errorLabels",
    "$clusterTime",
    "operationTime",
    "electionId",
    "opTime",
    "cursorsKilled",
    "cursorsNotFound",
    "cursorsAlive",
    "cursorsUnknown",
    "writeConcernError",
    "topologyVersion",
    "lastErrorObject",
];

/// Operator arguments inside data that are not values.
pub(super) const ARGUMENT_KEEP: &[&str] =
    &["$slice", "$position", "$sort", "$exists", "$type", "$options", "$meta", "$natural", "$caseSensitive"];

/// How the values under a key are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Left as they are.
    Keep,
    /// User data: literals hashed, keys and operator arguments kept.
    Data,
    /// Aggregation expressions: `$` paths and numbers kept, other literals hashed.
    Expr,
    /// A `$regex` pattern: hashed, an anchor kept.
    Pattern,
    /// An update: a document (data) or an update pipeline.
    Update,
    /// An aggregation pipeline (an array of stages).
    Pipeline,
    /// A request body's top level.
    Command,
    /// The statements of `updates`, `deletes` and bulkWrite's `ops`.
    Statements,
    /// A reply's top level.
    Reply,
    /// A reply's `cursor`.
    Cursor,
    /// A reply's `writeErrors`.
    WriteErrors,
}

/// The mode of the value under `key` in a document of `mode`.
pub(super) fn child_mode(mode: Mode, key: &str, first: bool) -> Mode {
    match mode {
        Mode::Keep => Mode::Keep,
        Mode::Command => {
            if KEEP.contains(&key) {
                Mode::Keep
            } else {
                match key {
                    "pipeline" => Mode::Pipeline,
                    "updates" | "deletes" | "ops" => Mode::Statements,
                    // findAndModify's update: a document or a pipeline.
                    "update" => Mode::Update,
                    // They wrap a whole command.
                    "explain" | "$query" | "query" if first => Mode::Command,
                    _ => Mode::Data,
                }
            }
        }
        Mode::Statements => match key {
            k if is_index(k) => Mode::Statements,
            "u" | "updateMods" => Mode::Update,
            "upsert" | "multi" | "limit" | "hint" | "collation" | "sort" | "upsertSupplied" | "insert"
            | "update" | "delete" => Mode::Keep,
            // q, filter, document, arrayFilters, c, constants, let, and anything new.
            _ => Mode::Data,
        },
        // A replacement or operator document (data), or a pipeline (see `value`).
        Mode::Update => Mode::Data,
        Mode::Data => {
            if ARGUMENT_KEEP.contains(&key) {
                Mode::Keep
            } else if key == "$expr" {
                Mode::Expr
            } else if key == "$regex" {
                Mode::Pattern
            } else {
                Mode::Data
            }
        }
        Mode::Expr => match key {
            "$literal" => Mode::Data,
            // A keyword (`textScore`, `searchScore`), which shapes keep.
            "$meta" => Mode::Keep,
            _ => Mode::Expr,
        },
        Mode::Pattern => Mode::Pattern,
        Mode::Pipeline => match key {
            "$match" | "$geoNear" | "$search" | "$searchMeta" | "$vectorSearch" => Mode::Data,
            "$lookup" | "$graphLookup" | "$unionWith" | "$facet" => Mode::Pipeline,
            "from" | "localField" | "foreignField" | "as" | "coll" | "connectFromField"
            | "connectToField" | "depthField" => Mode::Keep,
            "pipeline" => Mode::Pipeline,
            "let" | "startWith" => Mode::Expr,
            "$count" | "$out" | "$merge" | "$unset" | "$sort" | "$limit" | "$skip" | "$sample"
            | "$indexStats" | "$collStats" | "$planCacheStats" | "$changeStream" => Mode::Keep,
            "restrictSearchWithMatch" => Mode::Data,
            k if k.starts_with('$') => Mode::Expr,
            // `$facet`'s outputs are pipelines.
            _ => Mode::Pipeline,
        },
        Mode::Reply => {
            if REPLY_KEEP.contains(&key) {
                Mode::Keep
            } else {
                match key {
                    "cursor" => Mode::Cursor,
                    "writeErrors" => Mode::WriteErrors,
                    _ => Mode::Data,
                }
            }
        }
        Mode::Cursor => match key {
            "id" | "ns" | "postBatchResumeToken" | "atClusterTime" => Mode::Keep,
            _ => Mode::Data,
        },
        Mode::WriteErrors => match key {
            "index" | "code" | "codeName" | "keyPattern" => Mode::Keep,
            // The array's items are write errors too.
            k if is_index(k) => Mode::WriteErrors,
            _ => Mode::Data,
        },
    }
}

/// Commands whose first value is a user's or a role's name, not a collection's.
pub(super) const USER_COMMANDS: &[&str] = &[
    "usersInfo",
    "dropUser",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "rolesInfo",
    "createRole",
    "updateRole",
    "dropRole",
    "grantRolesToRole",
    "revokeRolesFromRole",
    "grantPrivilegesToRole",
    "revokePrivilegesFromRole",
];

/// The mode of a command's first value (its name's): a collection name or a
/// number is kept; a document is a wrapped command (explain, `$query`) or data; an
/// array, or a user's name, is data.
pub(super) fn first_value_mode(key: &str, kind: u8) -> Mode {
    match kind {
        0x03 if matches!(key, "explain" | "$query" | "query") => Mode::Command,
        0x03 | 0x04 => Mode::Data,
        _ if USER_COMMANDS.iter().any(|c| c.eq_ignore_ascii_case(key)) => Mode::Data,
        _ => Mode::Keep,
    }
}

/// An array item's key.
pub(super) fn is_index(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit())
}

/// A document sequence's items, by its identifier.
pub(super) fn sequence_mode(identifier: &[u8], request: bool) -> Mode {
    match identifier {
        b"updates" | b"deletes" | b"ops" if request => Mode::Statements,
        b"nsInfo" => Mode::Keep,
        _ => Mode::Data,
    }
}
