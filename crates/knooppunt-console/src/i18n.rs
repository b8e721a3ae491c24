//! The console's two languages: Dutch, and English for everyone else. Every text is written
//! at its place of use in both (`lang.t("…", "…")`), so none can be missing.

/// A page's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Nl,
    En,
}

impl Lang {
    /// The text in this language.
    pub(crate) fn t(self, nl: &'static str, en: &'static str) -> &'static str {
        match self {
            Lang::Nl => nl,
            Lang::En => en,
        }
    }

    /// The `lang` attribute.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Lang::Nl => "nl",
            Lang::En => "en",
        }
    }

    /// The other language: the switch offers it.
    pub(crate) fn other(self) -> Lang {
        match self {
            Lang::Nl => Lang::En,
            Lang::En => Lang::Nl,
        }
    }

    /// The language's name in itself.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Lang::Nl => "Nederlands",
            Lang::En => "English",
        }
    }
}
