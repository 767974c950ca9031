//! OAuth's parameters: a query string or an `application/x-www-form-urlencoded` body, where a
//! parameter sent twice is an error (RFC 6749 §3.1, §3.2) rather than first-one-wins.

use std::collections::BTreeMap;

use crate::query::unescape;

#[derive(Debug, PartialEq, Eq)]
pub enum ParamsError {
    Repeated(String),
    Undecodable,
}

impl ParamsError {
    pub fn describe(&self) -> String {
        match self {
            Self::Repeated(name) => format!("parameter {name} is given more than once"),
            Self::Undecodable => "the parameters are not valid form encoding".to_owned(),
        }
    }
}

/// Every parameter by name, decoded (`+` is a space); empty pairs are skipped.
pub fn parse(raw: &[u8]) -> Result<BTreeMap<String, String>, ParamsError> {
    let text = std::str::from_utf8(raw).map_err(|_| ParamsError::Undecodable)?;
    let mut params = BTreeMap::new();
    for pair in text.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |text: &str| {
            unescape(text, true).and_then(|bytes| String::from_utf8(bytes).ok()).ok_or(ParamsError::Undecodable)
        };
        let (name, value) = (decode(name)?, decode(value)?);
        if params.contains_key(&name) {
            return Err(ParamsError::Repeated(name));
        }
        params.insert(name, value);
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode_once_each() {
        let params = parse(b"a=1&b=x+y%26z&&c=&d").unwrap();
        assert_eq!(params["a"], "1");
        assert_eq!(params["b"], "x y&z");
        assert_eq!(params["c"], "");
        assert_eq!(params["d"], "");
        assert_eq!(parse(b"a=1&a=2"), Err(ParamsError::Repeated("a".into())));
        assert_eq!(parse(b"a=%zz"), Err(ParamsError::Undecodable));
        assert_eq!(parse(b"a=%ff"), Err(ParamsError::Undecodable));
        assert_eq!(parse(b""), Ok(BTreeMap::new()));
    }
}
