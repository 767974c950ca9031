//! The type of every std function, written in AILANG's own type syntax, with a one-line
//! description. The functions are listed in `catalog.txt`, one a line as `ailang builtins
//! list` prints them; the build makes that file the table [`BUILTINS`]. The checker reads the
//! signatures; `ailang builtins` and `ailang iface` print them. A test keeps the table and the
//! native modules in step.
//!
//! A signature is a function type, optionally prefixed by class constraints
//! (`Num a => ([a]) -> a`); lower-case names are type variables and `! {…}` is the effect row.

pub struct Builtin {
    pub module: &'static str,
    pub name: &'static str,
    pub signature: &'static str,
    pub doc: &'static str,
}

impl Builtin {
    /// The effect labels the signature's outermost row names (`IO`, `FS`), comma-joined.
    pub fn effect(&self) -> String {
        let Some(at) = self.signature.rfind("! {") else { return String::new() };
        if self.signature[at..].contains("->") {
            return String::new();
        }
        self.signature[at + 3..].trim_end_matches('}').trim().to_string()
    }
}

/// The std types and their constructors, as AILANG declarations.
pub const STD_TYPES: &[(&str, &str)] = &[
    ("prelude", "type Option[a] = Some(a) | None"),
    ("prelude", "type Result[a, e] = Ok(a) | Err(e)"),
    ("std/option", "type Option[a] = Some(a) | None"),
    ("std/result", "type Result[a, e] = Ok(a) | Err(e)"),
    ("std/array", "type Array[a] = [a]"),
    (
        "std/json",
        "type Json = JNull | JBool(bool) | JNumber(float) | JString(string) | JArray([Json]) | JObject([{key: string, value: Json}])",
    ),
];

// `pub static BUILTINS: &[Builtin]`, made from catalog.txt by the build script.
include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// The entry for `name` in std module `module` (`prelude` for the names every module sees).
pub fn lookup(module: &str, name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.module == module && b.name == name)
}
