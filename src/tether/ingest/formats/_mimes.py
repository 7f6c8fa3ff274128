"""The media types of the formats whose loaders set them (the format table names them
too): one spelling of each long OOXML and OpenDocument name."""

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ODT = "application/vnd.oasis.opendocument.text"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
ODP = "application/vnd.oasis.opendocument.presentation"
CSV = "text/csv"
TSV = "text/tab-separated-values"
XLS = "application/vnd.ms-excel"
DOC = "application/msword"
