//! Typed answers: ask for one JSON value that matches a schema and get it back decoded.
//!
//! The schema becomes the answer's own grammar ([`Session::send_matching`]), so the value always
//! parses and has the schema's shape; serde then builds the caller's type from it. A type that
//! derives `schemars::JsonSchema` states its schema itself ([`Session::generate`]), the way
//! Apple's `@Generable` types do.

use crate::constrain::Grammar;
use crate::error::{Error, Result};
use crate::session::{FinishReason, Session};

impl Session {
    /// Sends `text` as a user message and returns the answer: one JSON value, as compact JSON
    /// text, that matches `schema` (a JSON Schema as JSON text). The question and the answer join
    /// the conversation. A schema that cannot be used is an [`Error::Grammar`] before anything is
    /// sent; an answer cut off by `max_tokens` or the context is an [`Error::Constraint`].
    pub fn generate_json(&mut self, text: &str, schema: &str) -> Result<String> {
        let (answer, stats) = self.send_matching(text, &Grammar::JsonSchema(schema.to_owned()))?.text_and_stats()?;
        match stats.finish_reason {
            FinishReason::EndOfGeneration | FinishReason::StopSequence => Ok(answer),
            FinishReason::Cancelled => Err(Error::Cancelled),
            _ => Err(Error::Constraint(
                "the answer ended before its JSON value was complete (max_tokens or the context)".into(),
            )),
        }
    }

    /// Sends `text` and returns the answer as a `T`, generated to match `T`'s JSON Schema.
    /// Errors as [`Self::generate_json`]; a value serde refuses although it matches the schema
    /// (a schema that says less than the type's `Deserialize`) is an [`Error::Constraint`].
    ///
    /// ```no_run
    /// # fn demo(session: &mut tern::Session) -> tern::Result<()> {
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Capital {
    ///     country: String,
    ///     city: String,
    /// }
    /// let answer: Capital = session.generate("What is the capital of France?")?;
    /// println!("{} of {}", answer.city, answer.country);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "structured")]
    pub fn generate<T: serde::de::DeserializeOwned + schemars::JsonSchema>(&mut self, text: &str) -> Result<T> {
        let schema = schemars::schema_for!(T);
        let json = self.generate_json(text, &schema.to_value().to_string())?;
        serde_json::from_str(&json).map_err(|e| {
            Error::Constraint(format!("the answer matches the schema but is not a {}: {e}", std::any::type_name::<T>()))
        })
    }
}
