//! Which driver and ODM a client's handshake names (`client.driver.name`, which ODMs
//! extend: `nodejs|Mongoose`, `PyMongo|MongoEngine`), so that a fix is written in
//! the client's own language and names its ODM's remedy.

/// The language family of a driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Language {
    /// mongosh and anything unknown: the shell's syntax.
    Shell,
    /// PyMongo and what is built on it.
    Python,
    /// The Node.js driver.
    Node,
    /// The Rust driver.
    Rust,
    /// The Java drivers (Spring Data, Morphia).
    Java,
}

/// An object-document mapper whose remedy we can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Odm {
    /// MongoEngine (Python).
    MongoEngine,
    /// Mongoose (Node.js).
    Mongoose,
    /// Spring Data MongoDB (Java).
    SpringData,
    /// Morphia (Java).
    Morphia,
}

/// What one client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Stack {
    /// The driver's language.
    pub language: Language,
    /// The ODM on top, when the handshake names one.
    pub odm: Option<Odm>,
}

impl Stack {
    /// Reads a driver name as the correlator keeps it (`name version`).
    pub fn from_driver(driver: Option<&str>) -> Stack {
        let name = driver.unwrap_or("").split(' ').next().unwrap_or("").to_ascii_lowercase();
        let parts: Vec<&str> = name.split('|').collect();
        let has = |p: &str| parts.iter().any(|x| x.contains(p));
        let odm = if has("mongoengine") {
            Some(Odm::MongoEngine)
        } else if has("mongoose") {
            Some(Odm::Mongoose)
        } else if has("spring") {
            Some(Odm::SpringData)
        } else if has("morphia") {
            Some(Odm::Morphia)
        } else {
            None
        };
        let language = if has("mongosh") {
            Language::Shell
        } else if has("pymongo") || has("motor") {
            Language::Python
        } else if has("nodejs") {
            Language::Node
        } else if has("rust") {
            Language::Rust
        } else if has("java") || odm.is_some_and(|o| matches!(o, Odm::SpringData | Odm::Morphia)) {
            Language::Java
        } else {
            Language::Shell
        };
        Stack { language, odm }
    }

    /// A readable name: `PyMongo + MongoEngine` (for `PyMongo|c|MongoEngine 4.20.1||0.29.3`;
    /// one-letter parts such as PyMongo's `c`, its C extensions, say nothing to users).
    pub fn describe(driver: &str) -> String {
        let name = driver.split(' ').next().unwrap_or(driver);
        name.split('|').filter(|p| p.len() > 1).collect::<Vec<_>>().join(" + ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_names_say_the_language_and_the_odm() {
        let s = |d: &str| Stack::from_driver(Some(d));
        assert_eq!(s("PyMongo 4.20.1"), Stack { language: Language::Python, odm: None });
        assert_eq!(
            s("PyMongo|MongoEngine 4.20.1|0.29.3"),
            Stack { language: Language::Python, odm: Some(Odm::MongoEngine) }
        );
        assert_eq!(
            s("nodejs|Mongoose 6.20.0|8.19.1"),
            Stack { language: Language::Node, odm: Some(Odm::Mongoose) }
        );
        assert_eq!(s("nodejs|mongosh 6.20.0|2.5.8").language, Language::Shell);
        assert_eq!(s("mongo-rust-driver 3.3.0").language, Language::Rust);
        assert_eq!(s("mongo-java-driver|sync|spring-data 5.2").odm, Some(Odm::SpringData));
        assert_eq!(Stack::from_driver(None).language, Language::Shell);
        assert_eq!(Stack::describe("nodejs|Mongoose 6.20.0|8.19.1"), "nodejs + Mongoose");
        assert_eq!(Stack::describe("PyMongo|c|MongoEngine 4.20.1||0.29.3"), "PyMongo + MongoEngine");
    }
}
