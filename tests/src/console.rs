//! The console over plain HTTP, as a browser would use it without a browser: signing in
//! with the sign-in form's CSRF cookie and field, and the session cookie it gives.

/// The value of the first hidden field `name` in a page.
pub fn hidden_field(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {name} in the page"))
        + marker.len();
    page[start..].split('"').next().unwrap().to_owned()
}

/// The whole `Set-Cookie` header of `response` for the cookie `name`.
pub fn set_cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie"))
        .to_owned()
}

/// `name=value` of a `Set-Cookie` header, as a request's `Cookie` sends it back.
pub fn cookie_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap_or_default().to_owned()
}

/// Opens the sign-in page at `base` (the hub's URL) and posts its form with `fields`
/// (besides the CSRF token and `next`); the page's HTML and the answer to the form.
pub async fn sign_in(
    client: &reqwest::Client,
    base: &str,
    fields: &[(&str, &str)],
) -> (String, reqwest::Response) {
    let page = client
        .get(format!("{base}/console/login"))
        .send()
        .await
        .unwrap();
    let login = cookie_pair(&set_cookie(&page, "knooppunt_login"));
    let html = page.text().await.unwrap();
    let csrf = hidden_field(&html, "_csrf");
    let mut form = vec![("_csrf", csrf.as_str()), ("next", "/console")];
    form.extend_from_slice(fields);
    let answer = client
        .post(format!("{base}/console/login"))
        .header("cookie", login)
        .form(&form)
        .send()
        .await
        .unwrap();
    (html, answer)
}
