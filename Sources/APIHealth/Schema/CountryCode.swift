/// An ISO 3166-1 alpha-2 country code, as the `country` tag carries it: two upper-case letters naming an
/// assigned country (`BR`, `DE`, `US`), or `XK` (Kosovo, user-assigned but used by CDNs and the CLDR).
///
/// ```swift
/// CountryCode("br")?.code          // "BR"
/// CountryCode("XX")                // nil: Cloudflare's "unknown"
/// CountryCode(regionIdentifier: "419")   // nil: a UN M.49 region (Latin America), not a country
/// ```
///
/// The `country` tag is set by ``APIHealthConfiguration/country`` (or `APIHEALTH_COUNTRY`), learned from a
/// response header (``APIHealthConfiguration/CaptureOptions/countryHeader``) or, on Apple platforms, taken
/// from the user's region setting or the App Store storefront (`APIHealthConfiguration.useRegionSettingAsCountry()`,
/// `useStorefrontAsCountry()`).
public struct CountryCode: Sendable, Hashable, CustomStringConvertible {
    /// The two upper-case letters.
    public let code: String

    /// The code `text` names, in either case and without surrounding spaces; `nil` when it is not an
    /// assigned ISO 3166-1 alpha-2 code (`XX` and `T1`, which CDNs send for an unknown origin and for Tor,
    /// are not).
    ///
    /// - Parameter text: Two letters.
    public init?(_ text: some StringProtocol) {
        let trimmed = text.utf8.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        var letters: [UInt8] = []
        var ended = false
        for byte in trimmed {
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                ended = true
                continue
            }
            guard !ended, letters.count < 2 else { return nil }
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): letters.append(byte)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): letters.append(byte - 32)
            default: return nil
            }
        }
        guard letters.count == 2 else { return nil }
        let code = String(decoding: letters, as: UTF8.self)
        guard Self.assigned.contains(code) else { return nil }
        self.code = code
    }

    /// The country of a region identifier as `Locale.Region` gives it (`BR`, `us`); `nil` for a UN M.49
    /// area (`419`, `001`) or anything else that names no single country.
    ///
    /// - Parameter regionIdentifier: The device's region, `nil` when it has none.
    public init?(regionIdentifier: String?) {
        guard let regionIdentifier, regionIdentifier.utf8.count == 2 else { return nil }
        self.init(regionIdentifier)
    }

    /// The two letters.
    public var description: String { code }

    /// The assigned ISO 3166-1 alpha-2 codes (the ISO 3166 Maintenance Agency's list), and `XK`.
    static let assigned: Set<String> = Set(
        """
        AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY
        BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM
        FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT
        JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN
        MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT
        PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL
        TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW XK
        """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
    )
    /// The country of an ISO 3166-1 alpha-3 code (`BRA`, `deu`), as the App Store's storefront gives it;
    /// `nil` for anything else.
    ///
    /// - Parameter alpha3: Three letters.
    init?(alpha3: some StringProtocol) {
        let letters = alpha3.uppercased()
        guard letters.utf8.count == 3, let code = Self.alpha3[letters], let country = CountryCode(code) else {
            return nil
        }
        self = country
    }

    /// Alpha-3 to alpha-2 for every assigned code (Debian's iso-codes, ISO 3166-1), and `XKX` for `XK`.
    static let alpha3: [String: String] = Dictionary(
        uniqueKeysWithValues: """
            ABWAW AFGAF AGOAO AIAAI ALAAX ALBAL ANDAD AREAE ARGAR ARMAM ASMAS ATAAQ ATFTF ATGAG AUSAU AUTAT AZEAZ
            BDIBI BELBE BENBJ BESBQ BFABF BGDBD BGRBG BHRBH BHSBS BIHBA BLMBL BLRBY BLZBZ BMUBM BOLBO BRABR BRBBB
            BRNBN BTNBT BVTBV BWABW CAFCF CANCA CCKCC CHECH CHLCL CHNCN CIVCI CMRCM CODCD COGCG COKCK COLCO COMKM
            CPVCV CRICR CUBCU CUWCW CXRCX CYMKY CYPCY CZECZ DEUDE DJIDJ DMADM DNKDK DOMDO DZADZ ECUEC EGYEG ERIER
            ESHEH ESPES ESTEE ETHET FINFI FJIFJ FLKFK FRAFR FROFO FSMFM GABGA GBRGB GEOGE GGYGG GHAGH GIBGI GINGN
            GLPGP GMBGM GNBGW GNQGQ GRCGR GRDGD GRLGL GTMGT GUFGF GUMGU GUYGY HKGHK HMDHM HNDHN HRVHR HTIHT HUNHU
            IDNID IMNIM INDIN IOTIO IRLIE IRNIR IRQIQ ISLIS ISRIL ITAIT JAMJM JEYJE JORJO JPNJP KAZKZ KENKE KGZKG
            KHMKH KIRKI KNAKN KORKR KWTKW LAOLA LBNLB LBRLR LBYLY LCALC LIELI LKALK LSOLS LTULT LUXLU LVALV MACMO
            MAFMF MARMA MCOMC MDAMD MDGMG MDVMV MEXMX MHLMH MKDMK MLIML MLTMT MMRMM MNEME MNGMN MNPMP MOZMZ MRTMR
            MSRMS MTQMQ MUSMU MWIMW MYSMY MYTYT NAMNA NCLNC NERNE NFKNF NGANG NICNI NIUNU NLDNL NORNO NPLNP NRUNR
            NZLNZ OMNOM PAKPK PANPA PCNPN PERPE PHLPH PLWPW PNGPG POLPL PRIPR PRKKP PRTPT PRYPY PSEPS PYFPF QATQA
            REURE ROURO RUSRU RWARW SAUSA SDNSD SENSN SGPSG SGSGS SHNSH SJMSJ SLBSB SLESL SLVSV SMRSM SOMSO SPMPM
            SRBRS SSDSS STPST SURSR SVKSK SVNSI SWESE SWZSZ SXMSX SYCSC SYRSY TCATC TCDTD TGOTG THATH TJKTJ TKLTK
            TKMTM TLSTL TONTO TTOTT TUNTN TURTR TUVTV TWNTW TZATZ UGAUG UKRUA UMIUM URYUY USAUS UZBUZ VATVA VCTVC
            VENVE VGBVG VIRVI VNMVN VUTVU WLFWF WSMWS YEMYE ZAFZA ZMBZM ZWEZW
            XKXXK
            """.split(whereSeparator: { $0 == " " || $0 == "\n" }).map { entry in
                (String(entry.prefix(3)), String(entry.dropFirst(3)))
            }
    )
}
