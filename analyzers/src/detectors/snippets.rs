//! Fixes written in the client's own language and ODM, as its handshake names them
//! (see [`Stack`]), so a user can paste them. They use the names the traffic shows
//! (collections, fields) and placeholders where the traffic cannot know a name.

use super::driver::{Language, Odm, Stack};

/// One batched fetch that replaces a query per parent document.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The parent's collection (`posts`).
    pub parent: &'a str,
    /// The child's collection (`users`).
    pub child: &'a str,
    /// Where the link sits in a parent document (`authorId`, `items.productId`, `author.$id`).
    pub path: &'a str,
    /// The length of `path`'s prefix that is an array (`items`), if any.
    pub array: Option<usize>,
    /// The child's field the link matches (`_id`).
    pub field: &'a str,
    /// The fields the children read (their projection), `_id` aside.
    pub fields: &'a [String],
    /// The children already ask with `$in`, one group (a class, a key) at a time,
    /// and each group held one reference: batching per group is not enough.
    pub grouped: bool,
}

/// The code that fetches all children of one parent read at once.
pub fn batch_fetch(stack: Stack, b: &Batch<'_>) -> String {
    match (stack.language, stack.odm) {
        (_, Some(Odm::MongoEngine)) => mongoengine(b),
        (_, Some(Odm::Mongoose)) => mongoose(b),
        (Language::Python, _) => python(b),
        (Language::Node, _) => node(b),
        (Language::Rust, _) => rust(b),
        (Language::Java, _) => java(b),
        (Language::Shell, _) => shell(b),
    }
}

/// GridFS files read one by one: keep small files in the document instead.
pub fn gridfs(b: &Batch<'_>) -> String {
    format!(
        "// GridFS is for files over 16 MB: a smaller file fits in its document as binary data,\n// read with the rest in one round trip:\ndb.{}.updateOne({{ _id: docId }}, {{ $set: {{ {}: BinData(0, base64Content) }} }})",
        b.parent,
        b.path.split('.').next().unwrap_or(b.path)
    )
}

/// `users` -> `User`, `order_lines` -> `OrderLine`: the class an ODM maps to a collection.
pub(crate) fn class_name(collection: &str) -> String {
    let singular = collection.strip_suffix('s').filter(|s| !s.is_empty()).unwrap_or(collection);
    singular
        .split(['_', '-', '.'])
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

/// The path split at its array: (`items`, `productId`), or the whole path and "".
fn split<'a>(b: &Batch<'a>) -> (&'a str, &'a str) {
    match b.array.and_then(|n| Some((b.path.get(..n)?, b.path.get(n..)?))) {
        Some((outer, inner)) => (outer, inner.trim_start_matches('.')),
        None => (b.path, ""),
    }
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('.').filter(|s| !s.is_empty())
}

fn py_get(var: &str, path: &str) -> String {
    segments(path).fold(var.to_owned(), |acc, s| match s {
        "$id" => format!("{acc}.id"),
        _ => format!("{acc}[\"{s}\"]"),
    })
}

fn js_get(var: &str, path: &str, dbref_id: &str) -> String {
    segments(path).fold(var.to_owned(), |acc, s| match s {
        "$id" => format!("{acc}.{dbref_id}"),
        s if s.chars().all(|c| c.is_alphanumeric() || c == '_') => format!("{acc}.{s}"),
        _ => format!("{acc}[\"{s}\"]"),
    })
}

fn projection_json(fields: &[String], quote_keys: bool) -> Option<String> {
    let fields: Vec<String> = fields
        .iter()
        .filter(|f| f.as_str() != "_id")
        .map(|f| {
            if quote_keys || !f.chars().all(|c| c.is_alphanumeric() || c == '_') {
                format!("\"{f}\": 1")
            } else {
                format!("{f}: 1")
            }
        })
        .collect();
    (!fields.is_empty()).then(|| format!("{{{}}}", fields.join(", ")))
}

fn python(b: &Batch<'_>) -> String {
    let (outer, inner) = split(b);
    let ids = match b.array {
        Some(_) if inner.is_empty() => {
            format!("[x for d in {p} for x in {}]", py_get("d", outer), p = b.parent)
        }
        Some(_) => {
            format!("[{} for d in {p} for i in {}]", py_get("i", inner), py_get("d", outer), p = b.parent)
        }
        None => format!("[{} for d in {}]", py_get("d", b.path), b.parent),
    };
    let proj = projection_json(b.fields, true).map(|p| format!(", {p}")).unwrap_or_default();
    format!(
        "# one query for all of them instead of one per document of {parent}:\nids = {ids}\n{child} = {{c[\"{field}\"]: c for c in db.{child}.find({{\"{field}\": {{\"$in\": ids}}}}{proj})}}",
        parent = b.parent,
        child = b.child,
        field = b.field,
    )
}

fn js_ids(b: &Batch<'_>, dbref_id: &str) -> String {
    let (outer, inner) = split(b);
    match b.array {
        Some(_) if inner.is_empty() => format!("{}.flatMap(d => {})", b.parent, js_get("d", outer, dbref_id)),
        Some(_) => format!(
            "{}.flatMap(d => {}.map(i => {}))",
            b.parent,
            js_get("d", outer, dbref_id),
            js_get("i", inner, dbref_id)
        ),
        None => format!("{}.map(d => {})", b.parent, js_get("d", b.path, dbref_id)),
    }
}

fn node(b: &Batch<'_>) -> String {
    let proj = projection_json(b.fields, false).map(|p| format!(".project({p})")).unwrap_or_default();
    format!(
        "// one query for all of them instead of one per document of {parent}:\nconst ids = {ids};\nconst {child} = await db.collection(\"{child}\").find({{ {field}: {{ $in: ids }} }}){proj}.toArray();",
        parent = b.parent,
        ids = js_ids(b, "oid"),
        child = b.child,
        field = js_key(b.field),
    )
}

fn js_key(field: &str) -> String {
    if field.chars().all(|c| c.is_alphanumeric() || c == '_') {
        field.to_owned()
    } else {
        format!("\"{field}\"")
    }
}

fn shell(b: &Batch<'_>) -> String {
    let proj = projection_json(b.fields, false).map(|p| format!(", {p}")).unwrap_or_default();
    format!(
        "// one query for all of them instead of one per document of {parent}:\nconst {parent} = db.{parent}.find(/* the page's filter */).toArray();\nconst ids = {ids};\ndb.{child}.find({{ {field}: {{ $in: ids }} }}{proj})",
        parent = b.parent,
        ids = js_ids(b, "$id"),
        child = b.child,
        field = js_key(b.field),
    )
}

fn rust(b: &Batch<'_>) -> String {
    let (outer, inner) = split(b);
    // The value at `path` in the document `var` (a `&Document`), as Option<&Bson>.
    let get = |var: &str, path: &str| -> String {
        let segs: Vec<&str> = segments(path).collect();
        let Some((last, init)) = segs.split_last() else { return format!("Some({var})") };
        match init.split_first() {
            None => format!("{var}.get(\"{last}\")"),
            Some((first, rest)) => {
                let mut e = format!("{var}.get_document(\"{first}\").ok()");
                for s in rest {
                    e.push_str(&format!(".and_then(|x| x.get_document(\"{s}\").ok())"));
                }
                format!("{e}.and_then(|x| x.get(\"{last}\"))")
            }
        }
    };
    let ids = match b.array {
        Some(_) if inner.is_empty() => format!(
            "{p}.iter().flat_map(|d| d.get_array(\"{outer}\").cloned().unwrap_or_default()).collect()",
            p = b.parent
        ),
        Some(_) => format!(
            "{p}.iter().flat_map(|d| d.get_array(\"{outer}\").cloned().unwrap_or_default())\n    .filter_map(|i| i.as_document().and_then(|i| {}).cloned())\n    .collect()",
            get("i", inner),
            p = b.parent
        ),
        None => format!("{p}.iter().filter_map(|d| {}.cloned()).collect()", get("d", b.path), p = b.parent),
    };
    let proj =
        projection_json(b.fields, true).map(|p| format!("\n    .projection(doc! {p})")).unwrap_or_default();
    format!(
        "// one query for all of them instead of one per document of {parent}:\nlet ids: Vec<Bson> = {ids};\nlet {child}: Vec<Document> = db.collection::<Document>(\"{child}\")\n    .find(doc! {{ \"{field}\": {{ \"$in\": ids }} }}){proj}\n    .await?.try_collect().await?;",
        parent = b.parent,
        child = b.child,
        field = b.field,
    )
}

fn java(b: &Batch<'_>) -> String {
    format!(
        "// one query for all of them instead of one per document of {parent} (Spring Data: resolve\n// @DBRef/@DocumentReference eagerly, or batch by hand):\nList<Object> ids = {parent}.stream().map(d -> d.get(\"{path}\")).toList();\nList<Document> {child} = mongoTemplate.find(query(where(\"{field}\").in(ids)), Document.class, \"{child}\");",
        parent = b.parent,
        child = b.child,
        field = b.field,
        path = b.path,
    )
}

fn mongoengine(b: &Batch<'_>) -> String {
    let class = class_name(b.parent);
    let reference = segments(b.path).next().unwrap_or(b.path);
    if b.grouped {
        // GenericReferenceField values are {_cls, _ref}: MongoEngine already loads them
        // with one $in per class, so select_related() changes nothing.
        let base = class_name(b.child);
        let field = if b.array.is_some() {
            format!("ListField(ReferenceField({base}))")
        } else {
            format!("ReferenceField({base})")
        };
        return format!(
            "# A GenericReferenceField is loaded with one $in per referenced class, and here each
# class held one reference: one round trip each, select_related() or not. A ReferenceField
# to the base class (its subclasses share the {child} collection) loads them with one $in:
class {class}(Document):
    {reference} = {field}  # was a GenericReferenceField",
            child = b.child,
        );
    }
    format!(
        "# MongoEngine dereferences a ReferenceField one document at a time; select_related()\n# fetches the references of the whole queryset with one $in per collection:\nfor doc in {class}.objects(...).select_related():\n    doc.{reference}  # already loaded",
    )
}

fn mongoose(b: &Batch<'_>) -> String {
    let model = class_name(b.parent);
    let path = b.path.trim_end_matches(".$id");
    format!(
        "// Mongoose's populate() fetches a path for all documents with one $in\n// (not with perDocumentLimit, which sends one query per document):\nconst docs = await {model}.find(/* ... */).populate(\"{path}\");"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b<'a>(path: &'a str, array: Option<usize>, fields: &'a [String]) -> Batch<'a> {
        Batch { parent: "posts", child: "users", path, array, field: "_id", fields, grouped: false }
    }

    #[test]
    fn python_and_node_reach_into_arrays_and_dbrefs() {
        let f = vec!["_id".to_string(), "name".to_string()];
        let py = |p, a| python(&b(p, a, &f));
        assert!(py("authorId", None).contains("ids = [d[\"authorId\"] for d in posts]"));
        assert!(py("authorId", None).contains("db.users.find({\"_id\": {\"$in\": ids}}, {\"name\": 1})"));
        assert!(py("items.productId", Some(5))
            .contains("[i[\"productId\"] for d in posts for i in d[\"items\"]]"));
        assert!(py("tagIds", Some(6)).contains("[x for d in posts for x in d[\"tagIds\"]]"));
        assert!(py("author.$id", None).contains("[d[\"author\"].id for d in posts]"));
        let js = node(&b("items.productId", Some(5), &f));
        assert!(js.contains("posts.flatMap(d => d.items.map(i => i.productId))"), "{js}");
        assert!(js.contains(".find({ _id: { $in: ids } }).project({name: 1})"), "{js}");
        assert!(shell(&b("author.$id", None, &[])).contains("posts.map(d => d.author.$id)"));
    }

    #[test]
    fn odms_get_their_own_remedy() {
        let me = Stack { language: Language::Python, odm: Some(Odm::MongoEngine) };
        assert!(batch_fetch(me, &b("author", None, &[])).contains("Post.objects(...).select_related()"));
        let mg = Stack { language: Language::Node, odm: Some(Odm::Mongoose) };
        assert!(
            batch_fetch(mg, &b("author", None, &[])).contains("Post.find(/* ... */).populate(\"author\")")
        );
        assert_eq!(class_name("order_lines"), "OrderLine");
        let rs = rust(&b("author.id", None, &[]));
        assert!(rs.contains("d.get_document(\"author\").ok().and_then(|x| x.get(\"id\")).cloned()"), "{rs}");
        let rs = rust(&b("authorId", None, &[]));
        assert!(rs.contains("posts.iter().filter_map(|d| d.get(\"authorId\").cloned()).collect()"), "{rs}");
        let rs = rust(&b("items.productId", Some(5), &[]));
        assert!(
            rs.contains(".filter_map(|i| i.as_document().and_then(|i| i.get(\"productId\")).cloned())"),
            "{rs}"
        );
    }
}
