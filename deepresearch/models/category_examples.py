"""Labeled example claims for the category classifier (models/categorize.py): every claim of the
dev split of tests/data/extraction_labels.jsonl with its hand-given category (SciFact abstracts,
HotpotQA paragraphs, SQLite documentation: CC BY, CC BY-SA, public domain). Only the dev split: the
held-out and fresh splits are what the classifier is measured on. tests/test_extract.py checks that
this list is exactly those claims; regenerate it from the labels file when the dev labels change."""

EXAMPLES: list[tuple[str, str]] = [
    (
        "technology",
        "Alterations of the architecture of cerebral white matter in the developing human brain can affect "
        "cortical development and result in functional disabilities.",
    ),
    (
        "technology",
        "A line scan diffusion-weighted magnetic resonance imaging (MRI) sequence with diffusion tensor "
        "analysis was applied to measure the apparent diffusion coefficient, to calculate relative "
        "anisotropy, and to delineate three-dimensional fiber architecture in cerebral white matter in "
        "preterm (n = 17) and full-term infants (n = 7).",
    ),
    (
        "technology",
        "To assess effects of prematurity on cerebral white matter development, early gestation preterm "
        "infants (n = 10) were studied a second time at term.",
    ),
    (
        "technology",
        "In the central white matter the mean apparent diffusion coefficient at 28 wk was high, 1.8 "
        "microm2/ms, and decreased toward term to 1.2 microm2/ms.",
    ),
    (
        "technology",
        "In the posterior limb of the internal capsule, the mean apparent diffusion coefficients at both "
        "times were similar (1.2 versus 1.1 microm2/ms).",
    ),
    (
        "technology",
        "Relative anisotropy was higher the closer birth was to term with greater absolute values in the "
        "internal capsule than in the central white matter.",
    ),
    (
        "technology",
        "Preterm infants at term showed higher mean diffusion coefficients in the central white matter (1.4 "
        "+/- 0.24 versus.",
    ),
    (
        "technology",
        "Preterm infants at term showed higher mean diffusion coefficients in the central white matter (1.4 "
        "+/- 0.24 versus 1.15 +/- 0.09 microm2/ms, p = 0.016) and lower relative anisotropy in both areas "
        "compared with full-term infants (white matter, 10.9 +/- 0.6 versus 22.9 +/- 3.0%, p = 0.001.",
    ),
    (
        "technology",
        "Nonmyelinated fibers in the corpus callosum were visible by diffusion tensor MRI as early as 28 wk; "
        "full-term and preterm infants at term showed marked differences in white matter fiber organization.",
    ),
    (
        "technology",
        "The data indicate that quantitative assessment of water diffusion by diffusion tensor MRI provides "
        "insight into microstructural development in cerebral white matter in living infants.",
    ),
    (
        "technology",
        "DNA methylation plays an important role in biological processes in human health and disease.",
    ),
    (
        "technology",
        "Recent technological advances allow unbiased whole-genome DNA methylation (methylome) analysis to be"
        " carried out on human cells.",
    ),
    (
        "technology",
        "Using whole-genome bisulfite sequencing at 24.7-fold coverage (12.3-fold per strand), we report a "
        "comprehensive (92.62%) methylome and analysis of the unique sequences in human peripheral blood "
        "mononuclear cells (PBMC) from the same Asian individual whose genome was deciphered in the YH "
        "project.",
    ),
    (
        "technology",
        "PBMC constitute an important source for clinical blood tests world-wide.",
    ),
    (
        "technology",
        "We found that 68.4% of CpG sites and <0.2% of non-CpG sites were methylated, demonstrating that "
        "non-CpG cytosine methylation is minor in human PBMC.",
    ),
    (
        "technology",
        "Analysis of the PBMC methylome revealed a rich epigenomic landscape for 20 distinct genomic "
        "features, including regulatory, protein-coding, non-coding, RNA-coding, and repeat sequences.",
    ),
    (
        "technology",
        "Integration of our methylome data with the YH genome sequence enabled a first comprehensive "
        "assessment of allele-specific methylation (ASM) between the two haploid methylomes of any individual"
        " and allowed the identification of 599 haploid differentially methylated regions (hDMRs) covering "
        "287 genes.",
    ),
    (
        "technology",
        "Of these, 76 genes had hDMRs within 2 kb.",
    ),
    (
        "technology",
        "Of these, 76 genes had hDMRs within 2 kb of their transcriptional start sites of which >80% "
        "displayed allele-specific expression (ASE).",
    ),
    (
        "technology",
        "These data demonstrate that ASM is a recurrent phenomenon and is highly correlated with ASE in human PBMCs.",
    ),
    (
        "technology",
        "Together with recently reported similar studies, our study provides a comprehensive resource for "
        "future epigenomic research and confirms new sequencing technology as a paradigm for large-scale "
        "epigenomics studies.",
    ),
    (
        "technology",
        "Two human Golli (for gene expressed in the oligodendrocyte lineage)-MBP (for myelin basic protein) "
        "cDNAs have been isolated from a human oligodendroglioma cell line.",
    ),
    (
        "technology",
        "Analysis of these cDNAs has enabled us to determine the entire structure of the human Golli-MBP gene.",
    ),
    (
        "technology",
        "The Golli-MBP gene, which encompasses the MBP transcription unit, is approximately 179 kb in length "
        "and consists of 10 exons, seven of which constitute the MBP gene.",
    ),
    (
        "technology",
        "The human Golli-MBP gene contains two transcription start sites, each of which gives rise to a "
        "family of alternatively spliced transcripts.",
    ),
    (
        "technology",
        "At least two Golli-MBP transcripts, containing the first three exons of the gene and one or more MBP"
        " exons, are produced from the first transcription start site.",
    ),
    (
        "technology",
        "The second family of transcripts contains only MBP exons and produces the well-known MBPs.",
    ),
    (
        "technology",
        "In humans, RNA blot analysis revealed that Golli-MBP transcripts were expressed in fetal thymus, "
        "spleen, and human B-cell and macrophage cell lines, as well as in fetal spinal cord.",
    ),
    (
        "technology",
        "These findings clearly link the expression of exons encoding the autoimmunogen/encephalitogen MBP in"
        " the central nervous system to cells and tissues",
    ),
    (
        "technology",
        "These findings clearly link the expression of exons encoding the autoimmunogen/encephalitogen MBP in"
        " the central nervous system to cells and tissues of the immune system through normal expression of "
        "the Golli-MBP gene.",
    ),
    (
        "technology",
        "They also establish that this genetic locus, which includes the MBP gene, is conserved among "
        "species, providing further evidence that the MBP transcription unit is an integral part of the Golli"
        " transcription unit and suggest that this structural arrangement is important for the genetic "
        "function and/or regulation of these genes.",
    ),
    (
        "historical",
        "1069 ) was a Welsh King. the son of Cynfyn ap Gwerstan and brother of King Bleddyn of Powys.",
    ),
    (
        "historical",
        "Through his mother Angharad, he was half-brother to King Gruffydd ap Llywelyn as well.",
    ),
    (
        "historical",
        "Following the 1063 invasion of Wales by Harold and Tostig Godwinson that overthrew Gruffydd, "
        "Rhiwallon and Bleddyn jointly received Powys and Gwynedd on condition of faithfully serving Edward "
        'the Confessor "everywhere by water and by land".',
    ),
    (
        "historical",
        "Tostig Godwinson ( 1026 – 25 September 1066) was an Anglo-Saxon Earl of Northumbria and brother of "
        "King Harold Godwinson.",
    ),
    (
        "historical",
        "After being exiled by his brother, Tostig supported the Norwegian king Harald Hardrada's invasion of"
        " England, and was killed at the Battle of Stamford Bridge.",
    ),
    (
        "historical",
        "Rudolph William Louis Giuliani {'1': \", '2': \", '3': \", '4': \"} (born May 28, 1944) is an American "
        "lawyer, businessman, public speaker, former mayor of New York City, and an informal adviser on "
        "cybersecurity to the White House.",
    ),
    (
        "historical",
        "Herbert Weston Scott Howell III is an American conservative political consultant, whose recent "
        "clients include Meg Whitman and Rudy Giuliani.",
    ),
    (
        "historical",
        "Do Lafzon Ki Kahani (English: A Story of Two Words ) is a 2016 Indian Hindi-language romantic drama "
        "film written by Girish Dhamija and directed by Deepak Tijori.",
    ),
    (
        "historical",
        "Produced by Avinaash v rai ,Dhaval Jayantilal Gada under his banner Pen India Limited, it features "
        "Randeep Hooda and Kajal Aggarwal in the lead roles.",
    ),
    (
        "historical",
        'It is a remake of the 2011 Korean movie "Always", which was previously adapted in 2015 in Kannada as "Boxer".',
    ),
    (
        "historical",
        "The filming locations included Kuala Lumpur, Malaysia and India.",
    ),
    (
        "historical",
        "The film released worldwide on 10 June 2016.",
    ),
    (
        "historical",
        "Only You) is a South Korean film directed by Song Il-gon.",
    ),
    (
        "historical",
        "Starring So Ji-sub and Han Hyo-joo in the lead roles, it is about a romance between an ex-boxer who "
        "has closed his heart to the world and a telemarketer who remains spirited despite slowly going "
        "blind.",
    ),
    (
        "historical",
        "Scott Andrew Buchholz (born 27 March 1968) is an Australian politician.",
    ),
    (
        "historical",
        "He has been the Liberal National Party of Queensland (LNP) member of the new Australian House of "
        "Representatives seat of Wright since the 2010 federal election.",
    ),
    (
        "historical",
        "He previously served as chief of staff to Queensland Senator Barnaby Joyce and was a director of CQX"
        " Group of Transport Companies for 18 years.",
    ),
    (
        "historical",
        "He also occupied the unwinnable sixth spot on the Liberal/National Senate ticket in Queensland at "
        "the 2007 election, attracting 290 votes.",
    ),
    (
        "historical",
        "Barnaby Thomas Gerard Joyce is an Australian politician who has served as the Deputy Prime Minister "
        "of Australia since 18 February 2016, as the Leader of the National Party of Australia since 11 "
        "February 2016, and as the Minister for Agriculture and Water Resources since 21 September 2015.",
    ),
    (
        "historical",
        "He was sworn in as Minister for Agriculture in the Abbott Government on 18 September 2013.",
    ),
    (
        "historical",
        "Water Resources was added to his portfolio on 21 September 2015 in the Turnbull Government.",
    ),
    (
        "historical",
        "The Brisbane Institute was an independent think tank based in Brisbane, Queensland, Australia, "
        "founded in 1999.",
    ),
    (
        "historical",
        "It held talks, functions, debates and similar activities.",
    ),
    (
        "historical",
        "Notable speakers included Justice Michael Kirby, Lady Kennedy of The Shaws and the painter Jeffrey Smart.",
    ),
    (
        "historical",
        "Frank Jeffrey Edson Smart, {'1': \", '2': \", '3': \", '4': \"} (26 July 1921 – 20 June 2013) was an "
        "expatriate Australian painter known for his precisionist depictions of urban landscapes that are "
        '"full of private jokes and playful allusions".',
    ),
    (
        "technology",
        "The WAL must be synced to persistent storage prior to moving content from the WAL into the database "
        "and the database file must by synced prior to resetting the WAL.",
    ),
    (
        "technology",
        "Checkpoint also requires more seeking.",
    ),
    (
        "technology",
        "The checkpointer makes an effort to do as many sequential page writes to the database as it can (the"
        " pages are transferred from WAL to database in ascending order) but even then there will typically "
        "be many seek operations interspersed among the page writes.",
    ),
    (
        "technology",
        "These factors combine to make checkpoints slower than write transactions.",
    ),
    (
        "technology",
        "The default strategy is to allow successive write transactions to grow the WAL until the WAL becomes"
        " about 1000 pages in size, then to run a checkpoint operation for each subsequent COMMIT until the "
        "WAL is reset to be smaller than 1000 pages.",
    ),
    (
        "technology",
        "By default, the checkpoint will be run automatically by the same thread that does the COMMIT that "
        "pushes the WAL over its size limit.",
    ),
    (
        "technology",
        "This has the effect of causing most COMMIT operations to be very fast but an occasional COMMIT "
        "(those that trigger a checkpoint)",
    ),
    (
        "technology",
        "In its default configuration, SQLite will checkpoint the WAL file at the conclusion of any "
        "transaction when the WAL file is more than 1000 pages long.",
    ),
    (
        "technology",
        "compile-time and run-time options exist that can disable or defer this automatic checkpoint.",
    ),
    (
        "technology",
        "If an application disables the automatic checkpoint, then there is nothing to prevent the WAL file "
        "from growing excessively.",
    ),
    (
        "technology",
        "A checkpoint is only able to run to completion, and reset the WAL file, if there are no other "
        "database connections using the WAL file.",
    ),
    (
        "technology",
        "If another connection has a read transaction open, then the checkpoint cannot reset the WAL file "
        "because doing so might delete content out from under the reader.",
    ),
    (
        "technology",
        "The checkpoint will do as much work as it can without upsetting the reader, but it cannot run to completion.",
    ),
    (
        "technology",
        "The checkpoint will start up again where it left off after the next write transaction.",
    ),
    (
        "technology",
        "This repeats until some checkpoint is able to complete.",
    ),
    (
        "product_info",
        "This pragma returns auxiliary information about tables and indices.",
    ),
    (
        "product_info",
        "The returned information is used during testing to help verify that the query planner is operating correctly.",
    ),
    (
        "product_info",
        "The format and meaning of this pragma will likely change from one release to the next.",
    ),
    (
        "product_info",
        "Because of its volatility, the behavior and output format of this pragma are deliberately undocumented.",
    ),
    (
        "product_info",
        "The intended use of this pragma is only for testing and validation of SQLite.",
    ),
    (
        "product_info",
        "This pragma is subject to change without notice and is not recommended for use by application programs.",
    ),
    (
        "product_info",
        "The first (query) form will return the synchronous setting as an integer.",
    ),
    (
        "product_info",
        "The second form changes the synchronous setting.",
    ),
    (
        "product_info",
        "EXTRA synchronous is like FULL with the addition that.",
    ),
    (
        "technology",
        "Is convenient to be able to store all the different representations in the same column of the "
        "intermediate database while the cleanup is underway.",
    ),
    (
        "historical",
        "SQLite began as a TCL extension that later escaped into the wild.",
    ),
    (
        "technology",
        "TCL is a dynamic language in the sense that the programmer does not need to be aware of datatypes.",
    ),
    (
        "technology",
        "Under the hood, TCL keeps careful track of the datatype of every value, but to the developer and "
        "user of a TCL program, everything looks like a string.",
    ),
    (
        "technology",
        "Flexible typing is a natural fit for use with dynamic programming languages like TCL and others, "
        "since with a dynamic programming language, you can not always predict in advance what datatype a "
        "variable will hold.",
    ),
    (
        "technology",
        "When you need to store the value of that variable into the database, having a database that is "
        "supports flexible typing makes storage much easier.",
    ),
    (
        "product_info",
        "Fossil makes extensive use of SQLite in its implementation.",
    ),
    (
        "technology",
        'SQLite does have the single "sqlite3_value" superclass, so that proverb does not apply.',
    ),
    (
        "technology",
        "Any content is flushed to disk and while all changes are still held in the writer's private memory space.",
    ),
    (
        "technology",
        "Before any changes are made to the database file on disk, all readers must be (temporarily) expelled"
        " in order to give the writer exclusive access to the database file.",
    ),
    (
        "technology",
        "Hence, readers are prohibited from seeing incomplete transactions by virtue of being locked out of "
        "the database while the transaction is being written to disk.",
    ),
    (
        "technology",
        "Only after the transaction is completely written and synced to disk and committed are the readers "
        "allowed back into the database.",
    ),
    (
        "technology",
        "Hence readers never get a chance to see partially written changes.",
    ),
    (
        "technology",
        "WAL mode permits simultaneous readers and writers.",
    ),
    (
        "technology",
        "It can do this because changes do not overwrite the original database file, but rather go into the "
        "separate write-ahead log file.",
    ),
    (
        "technology",
        "That means that readers can continue to read the old, original, unaltered content from the original "
        "database file at the same time that the writer is appending to the write-ahead log.",
    ),
    (
        "technology",
        'In WAL mode, SQLite exhibits "snapshot isolation".',
    ),
    (
        "technology",
        "then issues one or more UPDATE, DELETE, and/or INSERT statements, then those changes are visible to "
        "subsequent SELECT statements that are evaluated in database connection X.",
    ),
    (
        "technology",
        "SELECT statements on a different database connection Y will show no changes until the X transaction commits.",
    ),
    (
        "technology",
        "SELECT statements in X will show the changes prior to the commit.",
    ),
    (
        "technology",
        "Within a single database connection X, a SELECT statement always sees all changes to the database "
        "that are completed prior to the start of the SELECT statement, whether committed or uncommitted.",
    ),
    (
        "technology",
        "The SELECT statement obviously does not see any changes that occur after the SELECT statement completes.",
    ),
    (
        "historical",
        "Rhiwallon ap Cynfyn (c. 1020 – c. 1069 ) was a Welsh King. the son of Cynfyn ap Gwerstan and brother"
        " of King Bleddyn of Powys.",
    ),
    (
        "historical",
        "Scott Buchholz has been the Liberal National Party of Queensland (LNP) member of the new Australian "
        "House of Representatives seat of Wright since the 2010 federal election.",
    ),
    (
        "historical",
        "Scott Buchholz previously served as chief of staff to Queensland Senator Barnaby Joyce and was a "
        "director of CQX Group of Transport Companies for 18 years.",
    ),
    (
        "historical",
        "Scott Buchholz also occupied the unwinnable sixth spot on the Liberal/National Senate ticket in "
        "Queensland at the 2007 election, attracting 290 votes.",
    ),
    (
        "historical",
        "Barnaby Joyce was sworn in as Minister for Agriculture in the Abbott Government on 18 September 2013.",
    ),
    (
        "historical",
        "The Brisbane Institute held talks, functions, debates and similar activities.",
    ),
]
