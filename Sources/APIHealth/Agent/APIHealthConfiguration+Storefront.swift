#if canImport(StoreKit)
import StoreKit

extension APIHealthConfiguration {
    /// Sets ``country`` from the App Store storefront of the account signed in on the device
    /// (`Storefront.current`): the country the account is registered in, which an app may read without a
    /// permission prompt. It stays the same when the user travels; where the device is, is what the API's
    /// CDN sees (``CaptureOptions/countryHeader``). Nothing is set without a storefront.
    ///
    /// ```swift
    /// var configuration = APIHealthConfiguration.app("shop-ios", destination: relay)
    /// await configuration.useStorefrontAsCountry()
    /// ```
    public mutating func useStorefrontAsCountry() async {
        guard let storefront = await Storefront.current else { return }
        setCountry(fromStorefront: storefront.countryCode)
    }
}
#endif
