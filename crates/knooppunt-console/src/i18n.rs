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
    /// `count` with the singular or the plural of its words (`(one, many)` per language):
    /// "1 dode brief", "2 dode brieven".
    pub(crate) fn count(
        self,
        count: u64,
        nl: (&'static str, &'static str),
        en: (&'static str, &'static str),
    ) -> String {
        let (one, many) = self.t2(nl, en);
        format!("{count} {}", if count == 1 { one } else { many })
    }

    fn t2(
        self,
        nl: (&'static str, &'static str),
        en: (&'static str, &'static str),
    ) -> (&'static str, &'static str) {
        match self {
            Lang::Nl => nl,
            Lang::En => en,
        }
    }

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

#[cfg(test)]
mod count_tests {
    use super::Lang;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        let words = (
            ("dode brief", "dode brieven"),
            ("dead letter", "dead letters"),
        );
        assert_eq!(Lang::Nl.count(1, words.0, words.1), "1 dode brief");
        assert_eq!(Lang::Nl.count(0, words.0, words.1), "0 dode brieven");
        assert_eq!(Lang::Nl.count(2, words.0, words.1), "2 dode brieven");
        assert_eq!(Lang::En.count(1, words.0, words.1), "1 dead letter");
        assert_eq!(Lang::En.count(3, words.0, words.1), "3 dead letters");
    }
}
