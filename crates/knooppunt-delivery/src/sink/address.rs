//! Where the hub may send requests (server-side request forgery): a sink must not point the
//! hub at the operator's own network. Loopback, private, shared (CGNAT), link-local (with the
//! cloud metadata address 169.254.169.254), unique-local, multicast, documentation and other
//! reserved addresses are refused unless the operator allows them by CIDR
//! (`delivery.allow_sink_networks`).
//!
//! The address is checked when a subscription is registered (its host resolved) and again on
//! every connection: the resolver of the HTTP client drops refused addresses, so a name that
//! resolves to something else later (DNS rebinding) still cannot reach them. Sinks given as
//! IP literals are checked before each request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// Why an address is not one the hub delivers to by default. IPv6 forms that carry an IPv4
/// address are judged by that address (IPv4-mapped, NAT64, 6to4); deprecated, tunnelled
/// and special forms whose target cannot be judged safely are refused outright
/// (IPv4-compatible `::/96`, IPv4-translated `::ffff:0:0:0/96`, Teredo `2001::/32`, the
/// discard prefix `100::/64`, site-local `fec0::/10`).
pub(crate) fn reserved_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => reserved_v4(v4),
        IpAddr::V6(v6) => reserved_v6(v6),
    }
}

/// The IPv4 address in the last 32 bits of an IPv6 address.
fn low_v4(v6: Ipv6Addr) -> Ipv4Addr {
    let [.., a, b] = v6.segments();
    Ipv4Addr::from((u32::from(a) << 16) | u32::from(b))
}

fn reserved_v6(v6: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return reserved_v4(v4);
    }
    let s = v6.segments();
    if v6.is_loopback() {
        Some("loopback")
    } else if v6.is_unspecified() {
        Some("unspecified")
    } else if s[..6] == [0; 6] {
        // ::a.b.c.d, deprecated (RFC 4291 §2.5.5.1): some stacks still route it to IPv4.
        Some("IPv4-compatible (deprecated)")
    } else if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
        // ::ffff:0:a.b.c.d (RFC 2765, SIIT).
        Some("IPv4-translated")
    } else if s[0] == 0x0100 && s[1..4] == [0; 3] {
        Some("discard-only (100::/64)")
    } else if s[0] & 0xffc0 == 0xfec0 {
        Some("site-local (deprecated)")
    } else if s[0] == 0x2001 && s[1] == 0 {
        // Teredo (RFC 4380): a tunnel whose IPv4 end is obfuscated in the address.
        Some("Teredo tunnel")
    } else if s[0] == 0x2002 {
        // 6to4 (RFC 3056): the IPv4 address in bits 16 to 48 decides.
        reserved_v4(Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])))
    } else if v6.is_unique_local() {
        Some("unique-local")
    } else if v6.is_unicast_link_local() {
        Some("link-local")
    } else if v6.is_multicast() {
        Some("multicast")
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        Some("documentation")
    } else if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        // NAT64, well-known 64:ff9b::/96: the IPv4 address it embeds decides.
        reserved_v4(low_v4(v6))
    } else if s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 1 {
        // NAT64, local-use 64:ff9b:1::/48 (RFC 8215), with a prefix of 48, 56, 64 or 96
        // bits that the hub cannot know (RFC 6052, 2.2: the IPv4 address sits after the
        // prefix, around the u-octet, bits 64 to 71): every place it may sit must hold a
        // public address.
        let o = v6.octets();
        [
            [o[6], o[7], o[9], o[10]],
            [o[7], o[9], o[10], o[11]],
            [o[9], o[10], o[11], o[12]],
            [o[12], o[13], o[14], o[15]],
        ]
        .into_iter()
        .find_map(|embedded| reserved_v4(Ipv4Addr::from(embedded)))
    } else {
        None
    }
}

fn reserved_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local (cloud metadata)")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_documentation() {
        Some("documentation")
    } else if a == 198 && (18..20).contains(&b) {
        Some("benchmarking")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("multicast or reserved")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        Some("IETF protocol assignments")
    } else {
        None
    }
}

/// The networks the operator allows beyond the public internet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkNetworks {
    allowed: Vec<IpNet>,
}

/// Why a sink address was refused: said without the address, so that a subscriber cannot
/// map the hub's network by trying sinks.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the sink's address is in a range the hub does not deliver to (loopback, private, \
     link-local or otherwise reserved); an operator can allow it with \
     delivery.allow_sink_networks"
)]
pub struct AddressRefused;

impl SinkNetworks {
    /// From CIDRs such as `10.20.0.0/16` or `::1/128` (a bare address is one host).
    pub fn parse(cidrs: &[String]) -> Result<SinkNetworks, String> {
        let allowed = cidrs
            .iter()
            .map(|text| {
                let text = text.trim();
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| format!("`{text}` is not a CIDR such as 10.20.0.0/16"))
            })
            .collect::<Result<_, _>>()?;
        Ok(SinkNetworks { allowed })
    }

    /// Whether the hub may connect to `ip`.
    pub fn permits(&self, ip: IpAddr) -> bool {
        reserved_range(ip).is_none() || self.allowed.iter().any(|net| net.contains(&ip))
    }

    /// Checks a sink URL: an IP literal at once, a name by resolving it. A name that does not
    /// resolve passes (the handshake will fail, and every connection is checked anyway); a
    /// name with any refused address is refused.
    pub async fn check_address(&self, url: &str) -> Result<(), AddressRefused> {
        // A URL the HTTP client cannot read is one it cannot be trusted to reach safely.
        let Ok(url) = reqwest::Url::parse(url) else {
            return Err(AddressRefused);
        };
        let port = url.port_or_known_default().unwrap_or(443);
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check(IpAddr::V6(ip)),
            Some(url::Host::Domain(name)) => match tokio::net::lookup_host((name, port)).await {
                Ok(addresses) => addresses
                    .map(|address| self.check(address.ip()))
                    .collect::<Result<Vec<()>, _>>()
                    .map(|_| ()),
                Err(_) => Ok(()),
            },
            None => Ok(()),
        }
    }

    fn check(&self, ip: IpAddr) -> Result<(), AddressRefused> {
        if self.permits(ip) {
            Ok(())
        } else {
            Err(AddressRefused)
        }
    }

    /// An IP-literal host of `url` that is refused.
    pub(crate) fn refuses_literal(&self, url: &reqwest::Url) -> bool {
        let ip = match url.host() {
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
            _ => return false,
        };
        !self.permits(ip)
    }
}

/// The HTTP client's resolver: the system's, without the refused addresses.
#[derive(Debug)]
pub(crate) struct GuardedResolver(pub(crate) Arc<SinkNetworks>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let networks = Arc::clone(&self.0);
        Box::pin(async move {
            let resolved = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let permitted: Vec<SocketAddr> = resolved
                .filter(|address| networks.permits(address.ip()))
                .collect();
            if permitted.is_empty() {
                return Err(Box::new(AddressRefused) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(permitted.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The URL half of the sink rule, checked when a subscription is registered (the address
/// half, [`SinkNetworks::check_address`], also on every connection).
/// An absolute `https` URL with a host (http-webhook.md §2: "HTTPS MUST be used for the
/// connection"); `http` only for a sink on this machine, or where the hub allows it.
pub fn check_sink_url(sink: &str, allow_http: bool) -> Result<(), String> {
    let uri: http::Uri = sink
        .parse()
        .map_err(|error| format!("`{sink}` is not a URL: {error}"))?;
    let host = uri.host().unwrap_or_default();
    let Some(protocol) = uri
        .scheme_str()
        .and_then(knooppunt_store::Protocol::of_scheme)
    else {
        return Err(format!(
            "`{sink}` must be an absolute https:// URL (mqtts:// for an MQTT broker, tls:// \
             for a NATS server, amqps:// for an AMQP 1.0 broker)"
        ));
    };
    if host.is_empty() {
        return Err(format!("`{sink}` has no host"));
    }
    if host.starts_with('[') && host.contains('%') {
        return Err(format!(
            "`{sink}` names an IPv6 zone (`%25...`): a sink is reached by a global address or a \
             host name, never through one of the hub's own interfaces"
        ));
    }
    let [plain, secure] = protocol.schemes();
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    if scheme == plain && !allow_http && !is_loopback(host) {
        return Err(format!(
            "`{sink}` must use {secure}://: events are delivered over TLS (http-webhook.md, \
             NL GOV Webhook guideline); plain {plain}:// is accepted only for a sink on the \
             hub's own machine, or on a hub configured with delivery.allow_http_sinks"
        ));
    }
    Ok(())
}

/// [`check_sink_url`] for a URL the hub makes HTTP requests to (an OAuth token endpoint).
pub fn check_http_url(url: &str, allow_http: bool) -> Result<(), String> {
    check_sink_url(url, allow_http)?;
    let scheme = url.split("://").next().unwrap_or_default();
    match knooppunt_store::Protocol::of_scheme(scheme) {
        Some(knooppunt_store::Protocol::Http) => Ok(()),
        _ => Err(format!("`{url}` must be an absolute https:// URL")),
    }
}

/// `localhost`, 127.0.0.0/8 or `::1`.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn reserved_ranges_are_refused_and_public_ones_permitted() {
        let none = SinkNetworks::default();
        for refused in [
            "127.0.0.1",
            "127.9.9.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::7f00:1",
            // Local-use NAT64 with a /48, /56 and /64 prefix (RFC 6052, 2.2).
            "64:ff9b:1:a00:0:100:808:808",
            "64:ff9b:1:7f:0:1:808:808",
            "64:ff9b:1::a9:fea9:fe00:0",
            "2001:db8::1",
            // The probe's forms: each reached loopback, link-local or private IPv4.
            "::127.0.0.1",
            "::a9fe:a9fe",
            "::8.8.8.8",
            "::ffff:0:127.0.0.1",
            "::ffff:0:8.8.8.8",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2002:c0a8:0101::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "100::1",
            "fec0::1",
            "feff::1",
        ] {
            assert!(!none.permits(ip(refused)), "{refused}");
        }
        for permitted in [
            "8.8.8.8",
            "145.12.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2a00:1450::1",
            "64:ff9b::808:808",
            "64:ff9b:1:808:8:808:808:808",
            "2002:808:808::1",
            "2001:4860::8888",
        ] {
            assert!(none.permits(ip(permitted)), "{permitted}");
        }
    }

    #[test]
    fn the_operator_allows_networks_by_cidr() {
        let allowed =
            SinkNetworks::parse(&["10.20.0.0/16".into(), "::1".into(), " 127.0.0.0/8 ".into()])
                .unwrap();
        assert!(allowed.permits(ip("10.20.5.5")));
        assert!(!allowed.permits(ip("10.21.0.1")));
        assert!(allowed.permits(ip("::1")));
        assert!(allowed.permits(ip("127.0.0.1")));
        assert!(!allowed.permits(ip("169.254.169.254")));
        let error = SinkNetworks::parse(&["10.0.0.0/33".into()]).unwrap_err();
        assert!(error.contains("10.0.0.0/33"), "{error}");
    }

    #[tokio::test]
    async fn names_are_resolved_and_checked() {
        let none = SinkNetworks::default();
        assert!(none.check_address("http://localhost:9/x").await.is_err());
        assert!(none.check_address("https://[::1]/x").await.is_err());
        assert!(
            none.check_address("https://169.254.169.254/latest")
                .await
                .is_err()
        );
        assert!(
            none.check_address("https://does-not-resolve.invalid/")
                .await
                .is_ok(),
            "an unknown name passes here; connections are checked too"
        );
        for hidden in [
            "https://[::127.0.0.1]/x",
            "https://[::a9fe:a9fe]/x",
            "https://[::ffff:0:7f00:1]/x",
            "https://[2002:7f00:1::1]/x",
            "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/x",
            "https://[100::1]/x",
            "https://[fec0::1]/x",
            "https://[fe80::1%25lo]/x",
        ] {
            assert!(none.check_address(hidden).await.is_err(), "{hidden}");
        }
        let loopback = SinkNetworks::parse(&["127.0.0.0/8".into(), "::1/128".into()]).unwrap();
        assert!(loopback.check_address("http://localhost:9/x").await.is_ok());
    }
}
